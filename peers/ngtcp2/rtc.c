/*
 * ngtcp2-rtc: pepkit's RTC client and server on ngtcp2 (0.12, Debian
 * bookworm's libngtcp2 with ngtcp2_crypto_gnutls), an independent QUIC stack
 * for the RTC workload. Called through peers/run, which documents the
 * command line:
 *
 *   ngtcp2-rtc server --listen IP:PORT
 *   ngtcp2-rtc version
 *   ngtcp2-rtc client --connect IP:PORT --rtc-frames N [--fps F]
 *                     [--frame-bytes B] [--timeout SECONDS]
 *
 * Protocol (the same as peers/quic-go and peers/aioquic, ALPN "pepkit-bulk",
 * TLS 1.3): the client opens a bidirectional stream and sends 17 bytes: 2,
 * N (big-endian u64), frames per second and bytes per frame (big-endian
 * u32s). The server sends frame k at start + k/fps on a unidirectional
 * stream of its own: k and its generation time (ns of the Unix epoch,
 * big-endian u64s), zeros up to the frame's size, FIN. The client records
 * each frame's arrival (its FIN) and prints one line:
 *   {"peer":"ngtcp2","mode":"rtc","frames":[[INDEX,GENERATED_NS,ARRIVED_NS],...]}
 * Frames that have not arrived by the timeout are left out (pepkit counts
 * them as missing). Congestion control is ngtcp2's default, CUBIC.
 *
 * Diagnostics: with PEPKIT_NGTCP2_CCLOG set to a file name, every
 * connection of the process appends ngtcp2's log lines about losses and the
 * congestion window to it (declared losses, window reductions, restored
 * windows after a spurious loss, the window after each ACK). Unset, the
 * default, ngtcp2 is given no log function at all.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#define ALPN "pepkit-bulk"
#define HEADER 17
#define MAX_FRAMES 1000000u      /* bounds the per-frame arrays (24 MB) */
#define MAX_FRAME_BYTES (1u << 20)
#define MAX_CONNS 64
#define MAX_READS 256            /* datagrams read per wake-up */
#define IDLE_TIMEOUT (30 * NGTCP2_SECONDS)
#define SCID_LEN 16

static const char priority[] =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
    "+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
    "%DISABLE_TLS13_COMPAT_MODE";
static const gnutls_datum_t alpn = {(unsigned char *)ALPN, sizeof(ALPN) - 1};

struct frame_slot { /* client: one server stream; server: one frame */
  uint8_t head[16];
  uint8_t len;
  uint64_t arrived;
};

struct peer {
  ngtcp2_crypto_conn_ref ref;
  ngtcp2_conn *conn;
  gnutls_session_t tls;
  int fd, used, failed;
  struct sockaddr_storage local, remote;
  socklen_t locallen, remotelen;
  ngtcp2_connection_close_error err;
  /* the request (client: what it sends; server: what it received) */
  uint8_t req[HEADER];
  size_t reqlen;
  int64_t req_stream;
  uint64_t frames;
  uint32_t fps, size;
  struct frame_slot *slots; /* frames of them */
  uint32_t *order;          /* client: slots in arrival order */
  uint8_t *zeros;           /* server: the frames' padding */
  uint64_t start, generated, writing, offset, done;
  int64_t writing_stream;
};

static volatile sig_atomic_t stop;
static gnutls_certificate_credentials_t cred;

static uint64_t clock_ns(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (uint64_t)t.tv_sec * NGTCP2_SECONDS + (uint64_t)t.tv_nsec;
}
static uint64_t mono(void) { return clock_ns(CLOCK_MONOTONIC); }

static void put_be(uint8_t *p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static uint64_t get_be(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

static void usage(void) {
  fprintf(stderr,
          "usage: ngtcp2-rtc server --listen IP:PORT\n"
          "       ngtcp2-rtc version\n"
          "       ngtcp2-rtc client --connect IP:PORT --rtc-frames N [--fps F] "
          "[--frame-bytes B] [--timeout SECONDS]\n");
  exit(2);
}

/* "IP:PORT" or "[IPv6]:PORT", numeric only. */
static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len) {
  char host[64];
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host)) return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = 0;
  char *h = host;
  if (h[0] == '[') {
    size_t n = strlen(h);
    if (n < 3 || h[n - 1] != ']') return -1;
    h[n - 1] = 0;
    h++;
  }
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                           .ai_socktype = SOCK_DGRAM};
  struct addrinfo *res;
  if (getaddrinfo(h, colon + 1, &hints, &res) != 0) return -1;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

/* ---- ngtcp2 callbacks shared by both sides ---- */

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx) {
  (void)ctx;
  (void)gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token,
                      size_t cidlen, void *user) {
  (void)conn;
  (void)user;
  if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
    return NGTCP2_ERR_CALLBACK_FAILURE;
  cid->datalen = cidlen;
  return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) {
  return ((struct peer *)ref->user_data)->conn;
}

static void fail_conn(struct peer *p, const char *why) {
  if (p->failed) return;
  p->failed = 1;
  ngtcp2_connection_close_error_set_application_error(&p->err, 1, (const uint8_t *)why,
                                                      strlen(why));
}

/* Client: a frame's bytes; it has arrived with its FIN. */
static void client_data(struct peer *p, uint32_t flags, int64_t id, const uint8_t *data,
                        size_t len) {
  if ((id & 3) != 3) return; /* only the server's unidirectional streams carry frames */
  uint64_t n = (uint64_t)id >> 2;
  if (n >= p->frames) return; /* cannot happen: we allow `frames` streams */
  struct frame_slot *s = &p->slots[n];
  size_t take = len < 16u - s->len ? len : 16u - s->len;
  memcpy(s->head + s->len, data, take);
  s->len = (uint8_t)(s->len + take);
  if ((flags & NGTCP2_STREAM_DATA_FLAG_FIN) && s->len == 16 && !s->arrived) {
    s->arrived = clock_ns(CLOCK_REALTIME);
    p->order[p->done++] = (uint32_t)n;
  }
}

/* Server: the request header on the client's bidirectional stream. */
static void server_data(struct peer *p, int64_t id, const uint8_t *data, size_t len) {
  if ((id & 3) != 0 || p->frames || p->failed) return;
  if (p->req_stream < 0) p->req_stream = id;
  if (id != p->req_stream) return;
  size_t take = len < HEADER - p->reqlen ? len : HEADER - p->reqlen;
  memcpy(p->req + p->reqlen, data, take);
  p->reqlen += take;
  if (p->reqlen >= 1 && p->req[0] != 2) return fail_conn(p, "this server serves RTC only (byte 0 = 2)");
  if (p->reqlen < HEADER) return;
  uint64_t frames = get_be(p->req + 1, 8);
  uint32_t fps = (uint32_t)get_be(p->req + 9, 4), size = (uint32_t)get_be(p->req + 13, 4);
  if (frames == 0 || frames > MAX_FRAMES || fps == 0 || size < 16 || size > MAX_FRAME_BYTES)
    return fail_conn(p, "bad RTC header");
  p->slots = calloc(frames, sizeof(*p->slots));
  p->zeros = calloc(size, 1);
  if (!p->slots || !p->zeros) return fail_conn(p, "out of memory");
  p->frames = frames, p->fps = fps, p->size = size;
  p->start = mono();
}

static int recv_stream_data_cb(ngtcp2_conn *conn, uint32_t flags, int64_t id,
                               uint64_t offset, const uint8_t *data, size_t len,
                               void *user, void *stream_user) {
  (void)offset;
  (void)stream_user;
  struct peer *p = user;
  if (ngtcp2_conn_is_server(conn))
    server_data(p, id, data, len);
  else
    client_data(p, flags, id, data, len);
  /* Consumed at once: give the window back. */
  ngtcp2_conn_extend_max_stream_offset(conn, id, len);
  ngtcp2_conn_extend_max_offset(conn, len);
  return 0;
}

static ngtcp2_callbacks callbacks(int server) {
  ngtcp2_callbacks cb = {
      .client_initial = server ? NULL : ngtcp2_crypto_client_initial_cb,
      .recv_client_initial = server ? ngtcp2_crypto_recv_client_initial_cb : NULL,
      .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
      .encrypt = ngtcp2_crypto_encrypt_cb,
      .decrypt = ngtcp2_crypto_decrypt_cb,
      .hp_mask = ngtcp2_crypto_hp_mask_cb,
      .recv_stream_data = recv_stream_data_cb,
      .recv_retry = server ? NULL : ngtcp2_crypto_recv_retry_cb,
      .rand = rand_cb,
      .get_new_connection_id = new_cid_cb,
      .update_key = ngtcp2_crypto_update_key_cb,
      .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
      .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
      .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
      .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
  };
  return cb;
}

static int tls_session(struct peer *p, int server) {
  int rv = gnutls_init(&p->tls, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) |
                                    GNUTLS_NO_END_OF_EARLY_DATA);
  if (rv == 0)
    rv = server ? ngtcp2_crypto_gnutls_configure_server_session(p->tls)
                : ngtcp2_crypto_gnutls_configure_client_session(p->tls);
  if (rv == 0) rv = gnutls_priority_set_direct(p->tls, priority, NULL);
  if (rv == 0) rv = gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, cred);
  if (rv == 0)
    rv = gnutls_alpn_set_protocols(p->tls, &alpn, 1,
                                   GNUTLS_ALPN_MANDATORY |
                                       (server ? GNUTLS_ALPN_SERVER_PRECEDENCE : 0));
  /* The server's certificate is throwaway: the client does not verify it. */
  if (rv == 0 && !server) rv = gnutls_server_name_set(p->tls, GNUTLS_NAME_DNS, "localhost", 9);
  if (rv != 0) {
    fprintf(stderr, "ngtcp2-rtc: TLS setup: %s\n", gnutls_strerror(rv));
    return -1;
  }
  p->ref.get_conn = get_conn;
  p->ref.user_data = p;
  gnutls_session_set_ptr(p->tls, &p->ref);
  return 0;
}

/* A self-signed P-256 certificate made at start, as the other peers do. */
static int make_certificate(void) {
  gnutls_x509_privkey_t key = NULL;
  gnutls_x509_crt_t crt = NULL;
  time_t now = time(NULL);
  int rv = gnutls_x509_privkey_init(&key);
  if (rv == 0)
    rv = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                      GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (rv == 0) rv = gnutls_x509_crt_init(&crt);
  if (rv == 0) rv = gnutls_x509_crt_set_version(crt, 3);
  if (rv == 0) rv = gnutls_x509_crt_set_serial(crt, "\x01", 1);
  if (rv == 0) rv = gnutls_x509_crt_set_activation_time(crt, now - 3600);
  if (rv == 0) rv = gnutls_x509_crt_set_expiration_time(crt, now + 86400);
  if (rv == 0) rv = gnutls_x509_crt_set_dn(crt, "CN=pepkit-peer", NULL);
  if (rv == 0)
    rv = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, "localhost", 9,
                                              GNUTLS_FSAN_SET);
  if (rv == 0) rv = gnutls_x509_crt_set_key(crt, key);
  if (rv == 0) rv = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
  if (rv == 0) rv = gnutls_certificate_set_x509_key(cred, &crt, 1, key);
  if (crt) gnutls_x509_crt_deinit(crt);
  if (key) gnutls_x509_privkey_deinit(key);
  if (rv != 0) fprintf(stderr, "ngtcp2-rtc: certificate: %s\n", gnutls_strerror(rv));
  return rv == 0 ? 0 : -1;
}

static ngtcp2_path path_of(struct peer *p) {
  ngtcp2_path path = {{(struct sockaddr *)&p->local, p->locallen},
                      {(struct sockaddr *)&p->remote, p->remotelen},
                      NULL};
  return path;
}

static int send_datagram(struct peer *p, const uint8_t *buf, size_t len) {
  ssize_t n;
  do {
    n = sendto(p->fd, buf, len, 0, (struct sockaddr *)&p->remote, p->remotelen);
  } while (n < 0 && errno == EINTR);
  /* A full socket buffer, or no server yet (ICMP), is a loss QUIC repairs. */
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
      errno != ECONNREFUSED) {
    fprintf(stderr, "ngtcp2-rtc: sendto: %s\n", strerror(errno));
    return -1;
  }
  return 0;
}

/* Server: generates the frames that are due. */
static void generate(struct peer *p, uint64_t now) {
  while (p->frames && p->generated < p->frames &&
         p->start + p->generated * NGTCP2_SECONDS / p->fps <= now) {
    put_be(p->slots[p->generated].head, p->generated, 8);
    put_be(p->slots[p->generated].head + 8, clock_ns(CLOCK_REALTIME), 8);
    p->generated++;
  }
}

/* The next stream data to write: (stream, vectors), or stream -1. */
static size_t next_data(struct peer *p, int64_t *id, ngtcp2_vec *v, int *fin) {
  *id = -1;
  *fin = 0;
  if (!ngtcp2_conn_get_handshake_completed(p->conn)) return 0;
  if (!ngtcp2_conn_is_server(p->conn)) {
    if (p->req_stream < 0 || p->reqlen == HEADER) return 0;
    *id = p->req_stream;
    v[0].base = p->req + p->reqlen;
    v[0].len = HEADER - p->reqlen;
    return 1;
  }
  if (p->writing >= p->generated) return 0;
  if (p->writing_stream < 0) {
    int64_t s;
    if (ngtcp2_conn_open_uni_stream(p->conn, &s, NULL) != 0)
      return 0; /* no stream credit (cannot happen: the client grants one per frame) */
    p->writing_stream = s;
  }
  *id = p->writing_stream;
  *fin = 1;
  size_t n = 0;
  if (p->offset < 16) {
    v[n].base = p->slots[p->writing].head + p->offset;
    v[n++].len = 16 - p->offset;
  }
  uint64_t from = p->offset < 16 ? 16 : p->offset;
  v[n].base = p->zeros;
  v[n++].len = p->size - from;
  return n;
}

static void wrote(struct peer *p, ngtcp2_ssize n) {
  if (n <= 0) return;
  if (!ngtcp2_conn_is_server(p->conn)) {
    p->reqlen += (size_t)n;
    return;
  }
  p->offset += (uint64_t)n;
  if (p->offset == p->size) p->writing++, p->offset = 0, p->writing_stream = -1;
}

/* Writes what ngtcp2 lets us (congestion window, pacing), at most one send
   quantum; returns 1 if there may be more right away, -1 on error. */
static int write_packets(struct peer *p) {
  uint8_t buf[65536];
  size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(p->conn);
  size_t quantum = ngtcp2_conn_get_send_quantum(p->conn) / max + 1;
  uint64_t ts = mono();
  int blocked = 0;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  if (max > sizeof(buf)) max = sizeof(buf);
  for (size_t sent = 0; sent < quantum;) {
    ngtcp2_vec v[2];
    int64_t id = -1;
    int fin = 0;
    size_t nv = blocked ? 0 : next_data(p, &id, v, &fin);
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_ssize ndata = -1;
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(p->conn, &ps.path, &pi, buf, max, &ndata,
                                               flags, id, nv ? v : NULL, nv, ts);
    if (n == NGTCP2_ERR_WRITE_MORE) {
      wrote(p, ndata);
      continue; /* room left in the packet for the next frame */
    }
    if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR) {
      blocked = 1; /* flow control: only ACKs and control frames this round */
      continue;
    }
    if (n < 0) {
      fprintf(stderr, "ngtcp2-rtc: write: %s\n", ngtcp2_strerror((int)n));
      ngtcp2_connection_close_error_set_transport_error_liberr(&p->err, (int)n, NULL, 0);
      return -1;
    }
    wrote(p, ndata);
    if (n == 0) break; /* congestion or pacing limited, or nothing to send */
    if (send_datagram(p, buf, (size_t)n) != 0) return -1;
    sent++;
    if (sent == quantum) {
      ngtcp2_conn_update_pkt_tx_time(p->conn, ts);
      return 1;
    }
  }
  ngtcp2_conn_update_pkt_tx_time(p->conn, ts);
  return 0;
}

/* Sends CONNECTION_CLOSE (with p->err) unless the connection is already closing. */
static void close_conn(struct peer *p) {
  uint8_t buf[1500];
  ngtcp2_path_storage ps;
  ngtcp2_pkt_info pi;
  if (!p->conn || ngtcp2_conn_is_in_closing_period(p->conn) ||
      ngtcp2_conn_is_in_draining_period(p->conn))
    return;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(p->conn, &ps.path, &pi, buf,
                                                      sizeof(buf), &p->err, mono());
  if (n > 0) (void)send_datagram(p, buf, (size_t)n);
}

static void free_peer(struct peer *p) {
  if (p->conn) ngtcp2_conn_del(p->conn);
  if (p->tls) gnutls_deinit(p->tls);
  free(p->slots);
  free(p->order);
  free(p->zeros);
  memset(p, 0, sizeof(*p));
}

/* Feeds one datagram; 0, or an ngtcp2 error (p->err set for a close). */
static int feed(struct peer *p, const uint8_t *buf, size_t len) {
  ngtcp2_path path = path_of(p);
  ngtcp2_pkt_info pi = {0};
  int rv = ngtcp2_conn_read_pkt(p->conn, &path, &pi, buf, len, mono());
  if (rv == NGTCP2_ERR_CRYPTO)
    ngtcp2_connection_close_error_set_transport_error_tls_alert(
        &p->err, ngtcp2_conn_get_tls_alert(p->conn), NULL, 0);
  else if (rv != 0)
    ngtcp2_connection_close_error_set_transport_error_liberr(&p->err, rv, NULL, 0);
  return rv;
}

static FILE *cclog; /* PEPKIT_NGTCP2_CCLOG, opened on first use */

/* ngtcp2's log function when PEPKIT_NGTCP2_CCLOG is set: keeps the lines
 * about losses and the congestion window, each after the Unix time in ns. */
static void cc_log(void *user_data, const char *format, ...) {
  (void)user_data;
  char line[1024];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(line, sizeof(line), format, ap);
  va_end(ap);
  if (n < 0 || !cclog) return;
  if (strstr(line, " lost type=") || strstr(line, "cwnd="))
    fprintf(cclog, "%" PRIu64 " %s\n", clock_ns(CLOCK_REALTIME), line);
}

static void transport_settings(ngtcp2_settings *s, ngtcp2_transport_params *t) {
  ngtcp2_settings_default(s); /* cc_algo = NGTCP2_CC_ALGO_CUBIC */
  const char *path = getenv("PEPKIT_NGTCP2_CCLOG");
  if (path && *path) {
    if (!cclog && (cclog = fopen(path, "a"))) setvbuf(cclog, NULL, _IOLBF, 0);
    if (cclog) s->log_printf = cc_log;
  }
  s->initial_ts = mono();
  ngtcp2_transport_params_default(t);
  t->max_idle_timeout = IDLE_TIMEOUT;
  /* quic-go's maximum receive windows, as the aioquic peer uses. */
  t->initial_max_data = 15u << 20;
  t->initial_max_stream_data_uni = 6u << 20;
  t->initial_max_stream_data_bidi_local = 6u << 20;
  t->initial_max_stream_data_bidi_remote = 6u << 20;
}

static struct timespec until(uint64_t at) {
  uint64_t now = mono(), d = at > now ? at - now : 0;
  struct timespec t = {(time_t)(d / NGTCP2_SECONDS), (long)(d % NGTCP2_SECONDS)};
  return t;
}

/* ---- server ---- */

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

/* A new connection from its first Initial, or NULL (dropped). */
static struct peer *accept_conn(struct peer *conns, int fd, const struct sockaddr_storage *local,
                                socklen_t locallen, const struct sockaddr_storage *from,
                                socklen_t fromlen, const uint8_t *buf, size_t len) {
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, buf, len) != 0) return NULL;
  struct peer *p = NULL;
  for (int i = 0; i < MAX_CONNS && !p; i++)
    if (!conns[i].used) p = &conns[i];
  if (!p) return NULL; /* full: the client retries its Initial */
  memset(p, 0, sizeof(*p));
  p->used = 1, p->fd = fd, p->req_stream = -1, p->writing_stream = -1;
  memcpy(&p->local, local, locallen);
  p->locallen = locallen;
  memcpy(&p->remote, from, fromlen);
  p->remotelen = fromlen;
  ngtcp2_connection_close_error_default(&p->err);
  ngtcp2_settings s;
  ngtcp2_transport_params t;
  transport_settings(&s, &t);
  t.initial_max_streams_bidi = 4;
  t.original_dcid = hd.dcid;
  t.stateless_reset_token_present = 1;
  ngtcp2_cid scid = {.datalen = SCID_LEN};
  ngtcp2_callbacks cb = callbacks(1);
  ngtcp2_path path = path_of(p);
  if (gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, SCID_LEN) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, t.stateless_reset_token, sizeof(t.stateless_reset_token)) != 0 ||
      ngtcp2_conn_server_new(&p->conn, &hd.scid, &scid, &path, hd.version, &cb, &s, &t, NULL, p) != 0 ||
      tls_session(p, 1) != 0) {
    free_peer(p);
    return NULL;
  }
  ngtcp2_conn_set_tls_native_handle(p->conn, p->tls);
  return p;
}

static int same_addr(const struct peer *p, const struct sockaddr_storage *a, socklen_t len) {
  return p->used && p->remotelen == len && memcmp(&p->remote, a, len) == 0;
}

static int server(const char *listen) {
  struct sockaddr_storage local;
  socklen_t locallen;
  if (parse_addr(listen, &local, &locallen) != 0) usage();
  /* SIGTERM stops us; blocked except inside ppoll, so none is missed. */
  sigset_t block, wait_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &wait_mask);
  sigdelset(&wait_mask, SIGTERM);
  sigdelset(&wait_mask, SIGINT);
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  int fd = socket(local.ss_family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&local, locallen) != 0) {
    fprintf(stderr, "ngtcp2-rtc: bind %s: %s\n", listen, strerror(errno));
    return 1;
  }
  if (make_certificate() != 0) return 1;
  static struct peer conns[MAX_CONNS];
  fprintf(stderr, "ready\n");
  uint8_t buf[65536];
  int again = 0; /* a connection wrote a full send quantum: write more at once */
  while (!stop) {
    /* Wake at the earliest timer or frame. */
    uint64_t wake = mono() + NGTCP2_SECONDS;
    for (int i = 0; i < MAX_CONNS; i++) {
      struct peer *p = &conns[i];
      if (!p->used) continue;
      uint64_t e = ngtcp2_conn_get_expiry(p->conn);
      if (e < wake) wake = e;
      if (p->frames && p->generated < p->frames) {
        uint64_t f = p->start + p->generated * NGTCP2_SECONDS / p->fps;
        if (f < wake) wake = f;
      }
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    struct timespec t = until(wake);
    int n = ppoll(&pfd, 1, again ? &(struct timespec){0, 0} : &t, &wait_mask);
    if (n < 0 && errno != EINTR) {
      fprintf(stderr, "ngtcp2-rtc: poll: %s\n", strerror(errno));
      return 1;
    }
    for (int r = 0; n > 0 && r < MAX_READS; r++) {
      struct sockaddr_storage from;
      socklen_t fromlen = sizeof(from);
      ssize_t len = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen);
      if (len <= 0) break;
      struct peer *p = NULL;
      for (int i = 0; i < MAX_CONNS && !p; i++)
        if (same_addr(&conns[i], &from, fromlen)) p = &conns[i];
      if (!p && !(p = accept_conn(conns, fd, &local, locallen, &from, fromlen, buf, (size_t)len)))
        continue;
      int rv = feed(p, buf, (size_t)len);
      if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_DROP_CONN || rv == NGTCP2_ERR_RETRY) {
        free_peer(p); /* the client closed (or the packet cannot start a connection) */
      } else if (rv != 0) {
        close_conn(p);
        free_peer(p);
      }
    }
    uint64_t now = mono();
    again = 0;
    for (int i = 0; i < MAX_CONNS; i++) {
      struct peer *p = &conns[i];
      if (!p->used) continue;
      if (ngtcp2_conn_get_expiry(p->conn) <= now) {
        int rv = ngtcp2_conn_handle_expiry(p->conn, now);
        if (rv != 0) { /* idle or handshake timeout: the connection is gone */
          free_peer(p);
          continue;
        }
      }
      generate(p, now);
      int w = p->failed ? -1 : write_packets(p);
      again |= w > 0;
      if (w < 0) {
        close_conn(p);
        free_peer(p);
      }
    }
  }
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i].used) {
      close_conn(&conns[i]);
      free_peer(&conns[i]);
    }
  close(fd);
  return 0;
}

/* ---- client ---- */

static int extend_bidi_cb(ngtcp2_conn *conn, uint64_t max, void *user) {
  (void)max;
  struct peer *p = user;
  if (p->req_stream < 0 && ngtcp2_conn_open_bidi_stream(conn, &p->req_stream, NULL) != 0)
    p->req_stream = -1;
  return 0;
}

static int client(const char *connect_to, uint64_t frames, uint32_t fps, uint32_t size,
                  double timeout) {
  static struct peer c;
  if (parse_addr(connect_to, &c.remote, &c.remotelen) != 0) usage();
  c.fd = socket(c.remote.ss_family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  c.locallen = sizeof(c.local);
  if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&c.remote, c.remotelen) != 0 ||
      getsockname(c.fd, (struct sockaddr *)&c.local, &c.locallen) != 0) {
    fprintf(stderr, "ngtcp2-rtc: connect %s: %s\n", connect_to, strerror(errno));
    return 1;
  }
  c.frames = frames, c.fps = fps, c.size = size, c.req_stream = -1;
  c.slots = calloc(frames, sizeof(*c.slots));
  c.order = calloc(frames, sizeof(*c.order));
  if (!c.slots || !c.order) return fprintf(stderr, "ngtcp2-rtc: out of memory\n"), 1;
  c.req[0] = 2;
  put_be(c.req + 1, frames, 8);
  put_be(c.req + 9, fps, 4);
  put_be(c.req + 13, size, 4);
  ngtcp2_connection_close_error_default(&c.err);

  ngtcp2_settings s;
  ngtcp2_transport_params t;
  transport_settings(&s, &t);
  t.initial_max_streams_uni = frames; /* one stream per frame */
  ngtcp2_cid dcid = {.datalen = NGTCP2_MIN_INITIAL_DCIDLEN}, scid = {.datalen = SCID_LEN};
  ngtcp2_callbacks cb = callbacks(0);
  cb.extend_max_local_streams_bidi = extend_bidi_cb;
  ngtcp2_path path = path_of(&c);
  if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0 ||
      ngtcp2_conn_client_new(&c.conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &s, &t,
                             NULL, &c) != 0 ||
      tls_session(&c, 0) != 0) {
    fprintf(stderr, "ngtcp2-rtc: cannot create the connection\n");
    return 1;
  }
  ngtcp2_conn_set_tls_native_handle(c.conn, c.tls);

  uint64_t deadline = mono() + (uint64_t)(timeout * NGTCP2_SECONDS);
  const char *error = NULL;
  uint8_t buf[65536];
  int again = 0;
  while (c.done < frames && !error) {
    int w = write_packets(&c);
    if (w < 0) {
      error = "write failed";
      break;
    }
    again = w;
    uint64_t now = mono(), expiry = ngtcp2_conn_get_expiry(c.conn);
    if (now >= deadline) {
      if (!ngtcp2_conn_get_handshake_completed(c.conn)) error = "handshake timed out";
      break; /* print what arrived: pepkit counts the rest as missing */
    }
    struct pollfd pfd = {c.fd, POLLIN, 0};
    struct timespec ts = until(expiry < deadline ? expiry : deadline);
    if (again) ts = (struct timespec){0, 0};
    int n = ppoll(&pfd, 1, &ts, NULL);
    if (n < 0 && errno != EINTR) {
      error = strerror(errno);
      break;
    }
    for (int r = 0; n > 0 && r < MAX_READS && !error; r++) {
      ssize_t len = recv(c.fd, buf, sizeof(buf), 0);
      if (len < 0 && errno == ECONNREFUSED) continue; /* the server is not up yet: retry */
      if (len <= 0) break;
      int rv = feed(&c, buf, (size_t)len);
      if (rv == NGTCP2_ERR_DRAINING) error = "the server closed the connection";
      else if (rv != 0) error = ngtcp2_strerror(rv);
    }
    if (!error && ngtcp2_conn_get_expiry(c.conn) <= mono()) {
      int rv = ngtcp2_conn_handle_expiry(c.conn, mono());
      if (rv != 0) error = ngtcp2_strerror(rv);
    }
  }
  close_conn(&c);
  if (error) {
    fprintf(stderr, "ngtcp2-rtc: %s (%" PRIu64 " of %" PRIu64 " frames)\n", error, c.done,
            frames);
    return 1;
  }
  /* In arrival order, as the other peers print them. */
  printf("{\"peer\":\"ngtcp2\",\"mode\":\"rtc\",\"frames\":[");
  for (uint64_t i = 0; i < c.done; i++) {
    const struct frame_slot *f = &c.slots[c.order[i]];
    printf("%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "", get_be(f->head, 8),
           get_be(f->head + 8, 8), f->arrived);
  }
  printf("]}\n");
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) usage();
  const char *listen = NULL, *connect_to = NULL;
  unsigned long long frames = 0, fps = 30, size = 12500;
  double timeout = 60;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    const char *k = argv[i], *v = argv[i + 1];
    char *end = NULL;
    errno = 0;
    if (!strcmp(k, "--listen")) listen = v;
    else if (!strcmp(k, "--connect")) connect_to = v;
    else if (!strcmp(k, "--rtc-frames")) frames = strtoull(v, &end, 10);
    else if (!strcmp(k, "--fps")) fps = strtoull(v, &end, 10);
    else if (!strcmp(k, "--frame-bytes")) size = strtoull(v, &end, 10);
    else if (!strcmp(k, "--timeout")) timeout = strtod(v, &end);
    else usage();
    if (end && (*end || end == v || errno)) usage();
  }
  if (!strcmp(argv[1], "version") && argc == 2) {
    printf("libngtcp2 %s, GnuTLS %s\n", ngtcp2_version(0)->version_str, gnutls_check_version(NULL));
    return 0;
  }
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return 1;
  if (!strcmp(argv[1], "server") && listen && !connect_to) return server(listen);
  if (strcmp(argv[1], "client") || !connect_to || listen || frames == 0 ||
      frames > MAX_FRAMES || fps == 0 || fps > 1000000 || size < 16 || size > MAX_FRAME_BYTES ||
      !(timeout > 0 && timeout < 1e6))
    usage();
  return client(connect_to, frames, (uint32_t)fps, (uint32_t)size, timeout);
}
