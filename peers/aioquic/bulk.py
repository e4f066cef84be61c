"""pepkit's bulk-transfer client and server on aioquic, an independent QUIC
implementation for interoperability tests. Called through peers/run, which
documents the command line.

Protocol (ALPN "pepkit-bulk", one bidirectional stream): the client sends a
9-byte header, byte 0 = 1 for download / 0 for upload, bytes 1..9 = N as a
big-endian u64. Download: the server sends N bytes then FIN. Upload: the
client sends N bytes then FIN; the server reads them all and answers with an
empty FIN, which is the client's end-of-transfer acknowledgement.

RTC (PEMI §6.1.2): byte 0 = 2, bytes 1..9 = the number of frames, then 4
bytes of frames per second and 4 of bytes per frame (big-endian). The server
sends frame k at start + k/fps on a unidirectional stream of its own: a
16-byte header (k, and its generation time in nanoseconds of the Unix epoch,
big-endian u64s), zeros up to the frame's size, FIN. The client prints every
frame's index, generation and arrival time (the FIN); pepkit computes delay
and jitter from them, as for its own endpoints.

We subclass QuicConnectionProtocol and work on its QuicConnection directly
instead of using aioquic's StreamWriter: that writer has no back-pressure, so
a large transfer would be copied into the send buffer all at once.
"""

import argparse
import asyncio
import datetime
import json
import signal
import ssl
import struct
import sys
import time

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ALPN = "pepkit-bulk"
CHUNK = 64 * 1024
ZEROS = bytes(CHUNK)
# Unacknowledged bytes we let sit in a stream's send buffer before waiting:
# enough to keep the congestion window full, bounded so memory stays small.
HIGH_WATER = 8 * 1024 * 1024
# Receive windows like quic-go's maxima (aioquic's default is 1 MB), so that
# the peers are comparable on paths with a large bandwidth-delay product.
MAX_DATA = 15 * 1024 * 1024
MAX_STREAM_DATA = 6 * 1024 * 1024
# CUBIC, as the other stacks use (PEMI §6: "all endpoints CUBIC"); aioquic's
# default is NewReno.
CONGESTION_CONTROL = "cubic"


def configuration(is_client):
    """Every connection's settings: ALPN, the receive windows, CUBIC."""
    return QuicConfiguration(is_client=is_client, alpn_protocols=[ALPN],
                             max_data=MAX_DATA, max_stream_data=MAX_STREAM_DATA,
                             congestion_control_algorithm=CONGESTION_CONTROL)


class BulkProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.progress = asyncio.Event()  # set whenever an ACK may have freed buffer
        self.terminated = None  # ConnectionTerminated, once the connection is gone

    def datagram_received(self, data, addr):
        super().datagram_received(data, addr)
        self.progress.set()

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.terminated = event
            self.progress.set()
        elif isinstance(event, StreamDataReceived):
            self.stream_data(event.stream_id, event.data, event.end_stream)

    def stream_data(self, stream_id, data, end_stream):
        pass

    def unacked(self, stream_id):
        # aioquic keeps sent data until it is acknowledged; this is the only
        # way to see how much that is (private, but the version is pinned).
        sender = self._quic._streams[stream_id].sender
        return sender._buffer_stop - sender._buffer_start

    async def send_n(self, stream_id, n):
        """Send n bytes on the stream, then FIN, without buffering them all."""
        while n > 0:
            while self.terminated is not None or self.unacked(stream_id) > HIGH_WATER:
                if self.terminated is not None:
                    raise ConnectionError(f"connection closed: {self.terminated.reason_phrase}")
                self.progress.clear()
                await self.progress.wait()
            k = min(n, CHUNK)
            self._quic.send_stream_data(stream_id, ZEROS[:k])
            n -= k
            self.transmit()
        self._quic.send_stream_data(stream_id, b"", end_stream=True)
        self.transmit()


class ServerProtocol(BulkProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.streams = {}  # stream id -> [header bytes, expected N, received]

    def stream_data(self, stream_id, data, end_stream):
        st = self.streams.setdefault(stream_id, [b"", None, 0])
        if st[1] is None:
            st[0] += data
            if len(st[0]) < 9:
                return
            if st[0][0] == 2:
                if len(st[0]) < 17:
                    return
                frames, fps, size = struct.unpack(">QII", st[0][1:17])
                st[1] = -1
                if fps == 0 or size < 16:
                    self._quic.close(error_code=1, reason_phrase="bad RTC header")
                    self.transmit()
                    return
                asyncio.ensure_future(self.send_frames(frames, fps, size))
                return
            header, data = st[0][:9], st[0][9:]
            if header[0] not in (0, 1):
                self._quic.close(error_code=1, reason_phrase="bad header")
                self.transmit()
                return
            download, st[1] = header[0] == 1, struct.unpack(">Q", header[1:])[0]
            if download:
                # Bytes after the header (none expected) and the client's FIN are ignored.
                asyncio.ensure_future(self.download(stream_id, st[1]))
                st[1] = -1
        if st[1] < 0:
            return
        st[2] += len(data)
        if end_stream:
            if st[2] != st[1]:
                print(f"aioquic server: upload got {st[2]} bytes, header said {st[1]}",
                      file=sys.stderr)
                self._quic.close(error_code=1, reason_phrase="short upload")
            else:
                self._quic.send_stream_data(stream_id, b"", end_stream=True)  # acknowledgement
            self.transmit()

    async def send_frames(self, frames, fps, size):
        """Frame k at start + k/fps, each on a unidirectional stream of its own."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        padding = bytes(size - 16)
        for k in range(frames):
            delay = start + k / fps - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.terminated is not None:
                return
            stream_id = self._quic.get_next_available_stream_id(is_unidirectional=True)
            frame = struct.pack(">QQ", k, time.time_ns()) + padding
            self._quic.send_stream_data(stream_id, frame, end_stream=True)
            self.transmit()

    async def download(self, stream_id, n):
        try:
            await self.send_n(stream_id, n)
        except ConnectionError as e:
            print(f"aioquic server: {e}", file=sys.stderr)


class ClientProtocol(BulkProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = 0
        self.finished = asyncio.get_running_loop().create_future()
        # Nobody awaits it if the handshake fails: mark its exception as seen.
        self.finished.add_done_callback(lambda f: f.cancelled() or f.exception())

    def stream_data(self, stream_id, data, end_stream):
        self.received += len(data)
        if end_stream and not self.finished.done():
            self.finished.set_result(time.perf_counter())

    def quic_event_received(self, event):
        super().quic_event_received(event)
        if isinstance(event, ConnectionTerminated) and not self.finished.done():
            self.finished.set_exception(
                ConnectionError(f"connection closed: {event.reason_phrase or event.error_code}"))


class RtcClientProtocol(BulkProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.expected = None
        self.heads = {}  # stream id -> first bytes
        self.frames = []  # [index, generated_ns, arrived_ns]
        self.finished = asyncio.get_running_loop().create_future()
        self.finished.add_done_callback(lambda f: f.cancelled() or f.exception())

    def stream_data(self, stream_id, data, end_stream):
        if stream_id & 3 != 3:  # only the server's unidirectional streams carry frames
            return
        head = self.heads.get(stream_id, b"")
        if len(head) < 16:
            head += data[:16 - len(head)]
            self.heads[stream_id] = head
        if end_stream and len(head) == 16:
            index, generated = struct.unpack(">QQ", head)
            self.frames.append([index, generated, time.time_ns()])
            del self.heads[stream_id]
            if len(self.frames) >= self.expected and not self.finished.done():
                self.finished.set_result(None)

    def quic_event_received(self, event):
        super().quic_event_received(event)
        if isinstance(event, ConnectionTerminated) and not self.finished.done():
            self.finished.set_exception(
                ConnectionError(f"connection closed: {event.reason_phrase or event.error_code}"))


async def rtc_client(addr, frames, fps, size, timeout):
    host, port = split_addr(addr)
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, ctx: None if isinstance(
        ctx.get("exception"), ConnectionError) else loop.default_exception_handler(ctx))
    config = configuration(is_client=True)
    config.verify_mode = ssl.CERT_NONE
    async with connect(host, port, configuration=config, create_protocol=RtcClientProtocol) as proto:
        proto.expected = frames
        stream_id = proto._quic.get_next_available_stream_id()
        proto._quic.send_stream_data(stream_id, struct.pack(">BQII", 2, frames, fps, size))
        proto.transmit()
        try:
            await asyncio.wait_for(asyncio.shield(proto.finished), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            pass  # print what arrived: pepkit counts the rest as missing
    print(json.dumps({"peer": "aioquic", "mode": "rtc", "frames": proto.frames},
                     separators=(",", ":")), flush=True)


def split_addr(addr):
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


async def client(addr, size, upload):
    host, port = split_addr(addr)
    # When our timeout cancels a handshake, aioquic later fails its own
    # connected-waiter future that nobody awaits any more; asyncio would log
    # that as "Future exception was never retrieved". Our error is enough.
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, ctx: None if isinstance(
        ctx.get("exception"), ConnectionError) else loop.default_exception_handler(ctx))
    config = configuration(is_client=True)
    config.verify_mode = ssl.CERT_NONE  # the server's certificate is self-signed
    start = time.perf_counter()  # before the handshake, as peers/run specifies
    async with connect(host, port, configuration=config, create_protocol=ClientProtocol) as proto:
        stream_id = proto._quic.get_next_available_stream_id()
        header = struct.pack(">BQ", 0 if upload else 1, size)
        if upload:
            proto._quic.send_stream_data(stream_id, header)
            await proto.send_n(stream_id, size)
        else:
            # The FIN after the header says there is nothing more to read.
            proto._quic.send_stream_data(stream_id, header, end_stream=True)
            proto.transmit()
        end = await proto.finished
        got = size if upload else proto.received
        if upload and proto.received:
            raise ConnectionError(f"server sent {proto.received} unexpected bytes")
    direction = "upload" if upload else "download"
    if got != size:
        raise ConnectionError(f"{direction} transferred {got} bytes, expected {size}")
    print(json.dumps({"peer": "aioquic", "direction": direction, "bytes": got,
                      "seconds": round(end - start, 6)}, separators=(",", ":")), flush=True)


def self_signed():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pepkit-peer")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    return cert, key


async def server(addr):
    host, port = split_addr(addr)
    config = configuration(is_client=False)
    config.certificate, config.private_key = self_signed()
    srv = await serve(host, port, configuration=config, create_protocol=ServerProtocol)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    # The first SIGTERM stops us; later ones (GNU timeout sends one to the
    # child and one to its process group) must not kill us with status 143
    # during shutdown, when asyncio and the interpreter restore the default
    # action for signals they handle. Ignored signals stay ignored.
    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    print("ready", file=sys.stderr, flush=True)
    await stop.wait()
    srv.close()


def main():
    p = argparse.ArgumentParser(prog="bulk.py")
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", required=True, metavar="IP:PORT")
    c = sub.add_parser("client")
    c.add_argument("--connect", required=True, metavar="IP:PORT")
    c.add_argument("--size", type=int, default=0)
    c.add_argument("--upload", action="store_true")
    c.add_argument("--timeout", type=float, default=60.0)
    c.add_argument("--rtc-frames", type=int, default=0)
    c.add_argument("--fps", type=int, default=30)
    c.add_argument("--frame-bytes", type=int, default=12500)
    a = p.parse_args()
    try:
        if a.role == "server":
            asyncio.run(server(a.listen))
        elif a.rtc_frames > 0:
            if a.fps <= 0 or a.frame_bytes < 16:
                p.error("--fps must be positive and --frame-bytes at least 16")
            asyncio.run(rtc_client(a.connect, a.rtc_frames, a.fps, a.frame_bytes, a.timeout))
        else:
            asyncio.run(asyncio.wait_for(client(a.connect, a.size, a.upload), a.timeout))
    except (asyncio.TimeoutError, TimeoutError):
        print(f"aioquic: timed out after {a.timeout} s", file=sys.stderr)
        sys.exit(1)
    except (ConnectionError, OSError) as e:
        print(f"aioquic: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
