package testcluster

import (
	"bufio"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func TestProxyForwardsCountsAndClosesWhenUpstreamIsDown(t *testing.T) {
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { // an echo server, one line per connection
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, line)
			}()
		}
	}()
	p, err := StartProxy("https://" + upstream.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "hello\n" {
		t.Fatalf("echo through the proxy: %q, %v", got, err)
	}
	c.Close()
	// The proxy counts bytes once they are in the client's socket, so the
	// client can read them first.
	waitFor(t, func() bool { return p.BytesDown() >= int64(len("hello\n")) })
	if p.Connections() != 1 || p.BytesDown() != int64(len("hello\n")) {
		t.Fatalf("connections %d, bytes down %d; want 1 and %d", p.Connections(), p.BytesDown(), len("hello\n"))
	}

	// Out of the rotation: the proxy closes the connection it forwards...
	held, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_ = held.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(held, "no newline yet"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // until the proxy forwards it
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.open) == 1
	})
	p.SetServing(false)
	// EOF, or a reset: the proxy closed it with the unread bytes.
	if n, err := held.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Fatalf("read from a forwarded connection taken out of the rotation: %d bytes, %v; want it closed", n, err)
	}
	// ...and new ones, although upstream listens.
	c, err = net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("the proxy refused a connection while out of the rotation: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from a connection while out of the rotation: %d bytes, %v; want EOF", n, err)
	}
	c.Close()
	p.SetServing(true)

	// Upstream gone: the proxy still accepts, and closes the connection.
	upstream.Close()
	c, err = net.DialTimeout("tcp", p.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("the proxy refused a connection while upstream was down: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from a proxied connection to a stopped server: %d bytes, %v; want EOF", n, err)
	}
	if p.Connections() != 4 {
		t.Fatalf("connections %d, want 4", p.Connections())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
