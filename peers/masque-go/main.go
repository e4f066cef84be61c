// masque-go peer: masque-go v0.4.0's CONNECT-UDP proxy, and a client that
// runs a QUIC bulk download (pepkit's bulk protocol, as peers/quic-go
// speaks it) through a MASQUE proxy, for pepkit's interoperability tests.
//
//	masquego proxy --listen IP:PORT --template URL --cert FILE --key FILE
//	masquego client --template URL --target IP:PORT --size BYTES [--timeout SECONDS]
//
// The proxy serves until SIGTERM, then exits 0; it prints "ready" on
// stderr once it listens. The client prints one line on stdout,
// {"peer":"masque-go","direction":"download","bytes":N,"seconds":S}, and
// exits 0, or says why on stderr and exits 1. The template is a full URL
// (https://IP:PORT/.well-known/masque/udp/{target_host}/{target_port}/).
package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/quic-go/masque-go"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/yosida95/uritemplate/v3"
)

// The inner connection's protocol (peers/quic-go): ALPN "pepkit-bulk".
const alpn = "pepkit-bulk"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "proxy":
		err = proxyMain(os.Args[2:])
	case "client":
		err = clientMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "masquego:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: masquego proxy --listen IP:PORT --template URL --cert FILE --key FILE")
	fmt.Fprintln(os.Stderr, "       masquego client --template URL --target IP:PORT --size BYTES [--timeout SECONDS]")
	os.Exit(2)
}

func proxyMain(args []string) error {
	flags := flag.NewFlagSet("proxy", flag.ExitOnError)
	listen := flags.String("listen", "", "address to listen on")
	templateStr := flags.String("template", "", "URI template (a full URL)")
	certFile := flags.String("cert", "", "certificate (PEM)")
	keyFile := flags.String("key", "", "private key (PEM)")
	flags.Parse(args)
	if *listen == "" || *templateStr == "" || *certFile == "" || *keyFile == "" {
		usage()
	}
	template, err := uritemplate.New(*templateStr)
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	u, err := url.Parse(*templateStr)
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	conn, err := net.ListenPacket("udp", *listen)
	if err != nil {
		return err
	}
	proxy := masque.Proxy{}
	mux := http.NewServeMux()
	mux.HandleFunc(u.Path, func(w http.ResponseWriter, r *http.Request) {
		req, err := masque.ParseProxyRequest(r, template)
		if err != nil {
			var perr *masque.ProxyRequestParseError
			if errors.As(err, &perr) {
				w.WriteHeader(perr.HTTPStatus)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		proxy.Proxy(w, req)
	})
	server := http3.Server{
		Handler:         mux,
		TLSConfig:       http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		EnableDatagrams: true,
		QUICConfig:      &quic.Config{EnableDatagrams: true, InitialPacketSize: 1350},
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		proxy.Close()
		server.Close()
	}()
	fmt.Fprintln(os.Stderr, "ready")
	if err := server.Serve(conn); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
		return err
	}
	return nil
}

func clientMain(args []string) error {
	flags := flag.NewFlagSet("client", flag.ExitOnError)
	templateStr := flags.String("template", "", "URI template (a full URL)")
	target := flags.String("target", "", "the bulk server (IP:PORT)")
	size := flags.Uint64("size", 0, "bytes to download")
	timeout := flags.Float64("timeout", 60, "seconds")
	flags.Parse(args)
	if *templateStr == "" || *target == "" || *size == 0 {
		usage()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	raddr, err := net.ResolveUDPAddr("udp", *target)
	if err != nil {
		return err
	}
	template, err := uritemplate.New(*templateStr)
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	start := time.Now()
	tr := masque.Transport{
		// The proxy under test presents a test certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}},
		QUICConfig:      &quic.Config{EnableDatagrams: true, InitialPacketSize: 1350},
	}
	req, err := masque.NewRequest(ctx, template, raddr.String())
	if err != nil {
		return err
	}
	pconn, rsp, err := tr.Dial(req)
	if err != nil {
		if rsp != nil {
			return fmt.Errorf("proxy answered %d: %w", rsp.StatusCode, err)
		}
		return fmt.Errorf("dialing through the proxy: %w", err)
	}
	defer pconn.Close()
	inner, err := quic.Dial(ctx, pconn, raddr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}},
		&quic.Config{DisablePathMTUDiscovery: true})
	if err != nil {
		return fmt.Errorf("inner connection: %w", err)
	}
	defer inner.CloseWithError(0, "done")
	stream, err := inner.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	stream.SetDeadline(deadline)
	var header [9]byte
	header[0] = 1 // download
	binary.BigEndian.PutUint64(header[1:], *size)
	if _, err := stream.Write(header[:]); err != nil {
		return err
	}
	stream.Close()
	n, err := io.Copy(io.Discard, stream)
	if err != nil {
		return fmt.Errorf("download after %d bytes: %w", n, err)
	}
	if uint64(n) != *size {
		return fmt.Errorf("downloaded %d bytes, expected %d", n, *size)
	}
	fmt.Printf("{\"peer\":\"masque-go\",\"direction\":\"download\",\"bytes\":%d,\"seconds\":%.6f}\n",
		n, time.Since(start).Seconds())
	return nil
}
