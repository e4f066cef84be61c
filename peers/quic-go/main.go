// quicgo-bulk: pepkit's bulk-transfer client and server on quic-go, an
// independent QUIC implementation for interoperability tests. It is called
// through peers/run, which documents the command line.
//
// Protocol (ALPN "pepkit-bulk", one bidirectional stream): the client sends a
// 9-byte header, byte 0 = 1 for download / 0 for upload, bytes 1..9 = N as a
// big-endian u64. Download: the server sends N bytes then FIN. Upload: the
// client sends N bytes then FIN; the server reads them all and answers with
// an empty FIN, which is the client's end-of-transfer acknowledgement.
//
// RTC (PEMI §6.1.2): byte 0 = 2, bytes 1..9 = the number of frames, then
// 4 bytes of frames per second and 4 of bytes per frame (big-endian). The
// server sends frame k at start + k/fps on a unidirectional stream of its
// own: a 16-byte header (k, and its generation time in nanoseconds of the
// Unix epoch, big-endian u64s), zeros up to the frame's size, FIN. The
// client records each frame's arrival (the FIN) and prints every frame's
// index, generation and arrival time; delay and jitter are computed by
// pepkit from them, as for its own endpoints.
//
// Diagnostics: with PEPKIT_QLOGDIR set (and not empty), every connection
// of this process, client or server, writes a qlog file to that directory
// (quic-go's qlog.DefaultConnectionTracer, <odcid>_<client|server>.sqlog).
// Unset, which is what peers/run and pepkit pass unless asked, no tracer
// is installed and nothing is written.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

const alpn = "pepkit-bulk"

// chunk is what we write per call: large enough that syscall and locking
// overhead is negligible, small enough to stay in cache.
var chunk = make([]byte, 64<<10)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "server":
		fs := flag.NewFlagSet("server", flag.ExitOnError)
		listen := fs.String("listen", "", "IP:PORT to bind (UDP)")
		fs.Parse(os.Args[2:])
		if *listen == "" {
			usage()
		}
		err = server(*listen)
	case "client":
		fs := flag.NewFlagSet("client", flag.ExitOnError)
		connect := fs.String("connect", "", "server IP:PORT")
		size := fs.Uint64("size", 0, "payload bytes")
		upload := fs.Bool("upload", false, "client -> server instead of server -> client")
		timeout := fs.Float64("timeout", 60, "seconds before giving up")
		frames := fs.Uint64("rtc-frames", 0, "RTC: frames to receive (instead of a transfer)")
		fps := fs.Uint("fps", 30, "RTC: frames per second")
		frameBytes := fs.Uint("frame-bytes", 12500, "RTC: bytes per frame (at least 16)")
		fs.Parse(os.Args[2:])
		if *connect == "" || *timeout <= 0 {
			usage()
		}
		limit := time.Duration(*timeout * float64(time.Second))
		if *frames > 0 {
			if *fps == 0 || *frameBytes < 16 {
				usage()
			}
			err = rtcClient(*connect, *frames, uint32(*fps), uint32(*frameBytes), limit)
		} else {
			err = client(*connect, *size, *upload, limit)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicgo-bulk:", err)
		os.Exit(1)
	}
}

// config is the quic.Config every connection starts from: quic-go's
// defaults, plus a qlog tracer when PEPKIT_QLOGDIR names a directory.
func config() *quic.Config {
	conf := &quic.Config{}
	if dir := os.Getenv("PEPKIT_QLOGDIR"); dir != "" {
		// DefaultConnectionTracer reads its directory from QLOGDIR.
		os.Setenv("QLOGDIR", dir)
		conf.Tracer = qlog.DefaultConnectionTracer
	}
	return conf
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: quicgo-bulk server --listen IP:PORT\n"+
		"       quicgo-bulk client --connect IP:PORT --size BYTES [--upload] [--timeout SECONDS]\n"+
		"       quicgo-bulk client --connect IP:PORT --rtc-frames N [--fps F] [--frame-bytes B] [--timeout SECONDS]")
	os.Exit(2)
}

func client(addr string, size uint64, upload bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The server's certificate is self-signed and generated at its start:
	// there is nothing to verify it against.
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}

	start := time.Now() // before the handshake, as peers/run specifies
	conn, err := quic.DialAddr(ctx, addr, tlsConf, config())
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	defer conn.CloseWithError(0, "done")
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	// Stream reads and writes take deadlines, not contexts.
	deadline, _ := ctx.Deadline()
	stream.SetDeadline(deadline)

	var header [9]byte
	if !upload {
		header[0] = 1
	}
	binary.BigEndian.PutUint64(header[1:], size)
	if _, err := stream.Write(header[:]); err != nil {
		return fmt.Errorf("send header: %w", err)
	}

	direction := "download"
	var got uint64
	if upload {
		direction = "upload"
		if err := writeN(stream, size); err != nil {
			return fmt.Errorf("upload: %w", err)
		}
		stream.Close() // FIN: the server now knows the upload is complete
		// The server's (empty) FIN says it has read every byte.
		extra, err := io.Copy(io.Discard, stream)
		if err != nil {
			return fmt.Errorf("waiting for the server's acknowledgement: %w", err)
		}
		if extra != 0 {
			return fmt.Errorf("server sent %d unexpected bytes", extra)
		}
		got = size
	} else {
		stream.Close() // nothing more to send; the server reads only the header
		n, err := io.Copy(io.Discard, stream)
		if err != nil {
			return fmt.Errorf("download after %d bytes: %w", n, err)
		}
		got = uint64(n)
	}
	elapsed := time.Since(start)
	if got != size {
		return fmt.Errorf("%s transferred %d bytes, expected %d", direction, got, size)
	}
	fmt.Printf("{\"peer\":\"quic-go\",\"direction\":\"%s\",\"bytes\":%d,\"seconds\":%.6f}\n",
		direction, got, elapsed.Seconds())
	return nil
}

func writeN(w io.Writer, n uint64) error {
	for n > 0 {
		b := chunk
		if n < uint64(len(b)) {
			b = b[:n]
		}
		k, err := w.Write(b)
		n -= uint64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

func server(addr string) error {
	// SIGTERM is the normal way to stop the server: close the listener so
	// Accept returns, and exit 0. Caught from before "ready" until we exit,
	// so a second SIGTERM (GNU timeout sends one to the child and one to its
	// process group) cannot kill us with the default action.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		<-sigs
		stop()
	}()

	cert, err := selfSigned()
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}
	ln, err := quic.ListenAddr(addr, tlsConf, config())
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	fmt.Fprintln(os.Stderr, "ready")
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				ln.Close()
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go serve(conn)
	}
}

// serve runs one transfer; errors are the client's problem, so they are only logged.
func serve(conn *quic.Conn) {
	ctx, cancel := context.WithTimeout(conn.Context(), 10*time.Minute)
	defer cancel()
	if err := transfer(ctx, conn); err != nil {
		fmt.Fprintln(os.Stderr, "quicgo-bulk server:", conn.RemoteAddr(), err)
		conn.CloseWithError(1, "transfer failed")
		return
	}
	// Leave closing to the client: closing here could discard data that is
	// still in flight or unacknowledged.
	<-ctx.Done()
}

func transfer(ctx context.Context, conn *quic.Conn) error {
	stream, err := conn.AcceptStream(ctx)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	stream.SetDeadline(deadline)
	var header [9]byte
	if _, err := io.ReadFull(stream, header[:]); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	n := binary.BigEndian.Uint64(header[1:])
	switch header[0] {
	case 2: // RTC frames
		var more [8]byte
		if _, err := io.ReadFull(stream, more[:]); err != nil {
			return fmt.Errorf("read the RTC header: %w", err)
		}
		fps := binary.BigEndian.Uint32(more[:4])
		size := binary.BigEndian.Uint32(more[4:])
		return sendFrames(ctx, conn, n, fps, size)
	case 1: // download
		if err := writeN(stream, n); err != nil {
			return err
		}
		return stream.Close()
	case 0: // upload
		got, err := io.Copy(io.Discard, stream)
		if err != nil {
			return err
		}
		if uint64(got) != n {
			return fmt.Errorf("upload: got %d bytes, header said %d", got, n)
		}
		return stream.Close() // the empty FIN acknowledges the upload
	default:
		return errors.New("bad header")
	}
}

// sendFrames sends frame k at start + k/fps, each on its own
// unidirectional stream, from a goroutine of its own, so that a frame the
// congestion window holds back does not hold back the next one's
// generation (as a real encoder does not wait for the network).
func sendFrames(ctx context.Context, conn *quic.Conn, frames uint64, fps, size uint32) error {
	if fps == 0 || size < 16 {
		return errors.New("bad RTC header")
	}
	start := time.Now()
	errs := make(chan error, 1)
	for k := uint64(0); k < frames; k++ {
		at := start.Add(time.Duration(k) * time.Second / time.Duration(fps))
		select {
		case <-time.After(time.Until(at)):
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			return err
		}
		frame := make([]byte, size)
		binary.BigEndian.PutUint64(frame[:8], k)
		binary.BigEndian.PutUint64(frame[8:16], uint64(time.Now().UnixNano()))
		go func() {
			stream, err := conn.OpenUniStreamSync(ctx)
			if err == nil {
				_, err = stream.Write(frame)
			}
			if err == nil {
				err = stream.Close()
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	return nil
}

// rtcClient asks for frames and records each one's arrival; it prints one
// JSON line with every frame received: [index, generated_ns, arrived_ns].
func rtcClient(addr string, frames uint64, fps, size uint32, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}
	conf := config()
	conf.MaxIncomingUniStreams = 1 << 16
	conn, err := quic.DialAddr(ctx, addr, tlsConf, conf)
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	defer conn.CloseWithError(0, "done")
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	var header [17]byte
	header[0] = 2
	binary.BigEndian.PutUint64(header[1:9], frames)
	binary.BigEndian.PutUint32(header[9:13], fps)
	binary.BigEndian.PutUint32(header[13:17], size)
	if _, err := stream.Write(header[:]); err != nil {
		return fmt.Errorf("send header: %w", err)
	}
	type arrival struct{ index, generated, arrived uint64 }
	arrivals := make(chan arrival, 1024)
	go func() {
		for {
			s, err := conn.AcceptUniStream(ctx)
			if err != nil {
				return
			}
			go func() {
				data, err := io.ReadAll(s)
				if err != nil || len(data) < 16 {
					return
				}
				arrivals <- arrival{
					binary.BigEndian.Uint64(data[:8]),
					binary.BigEndian.Uint64(data[8:16]),
					uint64(time.Now().UnixNano()),
				}
			}()
		}
	}()
	got := make([]arrival, 0, frames)
	for uint64(len(got)) < frames {
		select {
		case a := <-arrivals:
			got = append(got, a)
		case <-ctx.Done():
			frames = uint64(len(got)) // print what arrived: pepkit counts the rest as missing
		}
	}
	fmt.Printf("{\"peer\":\"quic-go\",\"mode\":\"rtc\",\"frames\":[")
	for i, a := range got {
		if i > 0 {
			fmt.Print(",")
		}
		fmt.Printf("[%d,%d,%d]", a.index, a.generated, a.arrived)
	}
	fmt.Println("]}")
	return nil
}

// selfSigned makes a throwaway certificate: clients do not verify it.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "pepkit-peer"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
