// quicgo-bulk: pepkit's bulk-transfer client and server on quic-go, an
// independent QUIC implementation for interoperability tests. It is called
// through peers/run, which documents the command line.
//
// Protocol (ALPN "pepkit-bulk", one bidirectional stream): the client sends a
// 9-byte header, byte 0 = 1 for download / 0 for upload, bytes 1..9 = N as a
// big-endian u64. Download: the server sends N bytes then FIN. Upload: the
// client sends N bytes then FIN; the server reads them all and answers with
// an empty FIN, which is the client's end-of-transfer acknowledgement.
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
		fs.Parse(os.Args[2:])
		if *connect == "" || *timeout <= 0 {
			usage()
		}
		err = client(*connect, *size, *upload, time.Duration(*timeout*float64(time.Second)))
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quicgo-bulk:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: quicgo-bulk server --listen IP:PORT\n"+
		"       quicgo-bulk client --connect IP:PORT --size BYTES [--upload] [--timeout SECONDS]")
	os.Exit(2)
}

func client(addr string, size uint64, upload bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The server's certificate is self-signed and generated at its start:
	// there is nothing to verify it against.
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}

	start := time.Now() // before the handshake, as peers/run specifies
	conn, err := quic.DialAddr(ctx, addr, tlsConf, nil)
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
	ln, err := quic.ListenAddr(addr, tlsConf, nil)
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
