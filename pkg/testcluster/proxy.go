package testcluster

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards TCP connections to the API server, as a load balancer in
// front of it does, and counts them. While the API server is down it still
// accepts connections and closes them at once, so a client sees EOF, as
// behind a load balancer, rather than "connection refused", and every attempt
// to reach the API server shows in Connections. TLS passes through: the
// serving certificate names 127.0.0.1, and the proxy listens there too.
//
// SetServing(false) takes the API server out of the rotation, as a load
// balancer does when its health check (/readyz) fails: the proxy closes the
// connections it forwards and every new one, even while the API server
// listens. SetServing(true) puts it back. A fault test that restarts the API
// server thus decides when clients can reach it again: once /readyz answers,
// not as soon as the process listens.
type Proxy struct {
	// Addr is the proxy's loopback address, host:port.
	Addr string

	upstream string
	listener net.Listener
	conns    atomic.Int64 // accepted connections
	down     atomic.Int64 // bytes from the API server to the clients

	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
	out    bool // out of the rotation: SetServing(false)
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to the host of apiURL.
func StartProxy(apiURL string) (*Proxy, error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("parse API server URL: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{Addr: l.Addr().String(), upstream: u.Host, listener: l, open: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Connections is the number of connections accepted so far.
func (p *Proxy) Connections() int64 { return p.conns.Load() }

// BytesDown is the number of bytes the API server sent through the proxy so far.
// Bytes count once written to the client's socket: a client may read them a
// moment before they count, so a test polls for the count it expects.
func (p *Proxy) BytesDown() int64 { return p.down.Load() }

// Close stops accepting, closes the forwarded connections and waits for
// their goroutines.
func (p *Proxy) Close() error {
	err := p.listener.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.open {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// SetServing puts the API server in (true, the initial state) or out of the
// rotation. Taking it out closes the forwarded connections.
func (p *Proxy) SetServing(serving bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = !serving
	if p.out {
		for c := range p.open {
			_ = c.Close()
		}
	}
}

// WriteKubeconfig writes a copy of the kubeconfig at src whose clusters point
// at the proxy to dst.
func (p *Proxy) WriteKubeconfig(src, dst string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + p.Addr
	}
	if err := clientcmd.WriteToFile(*cfg, dst); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		ok, closed := p.track(conn)
		if closed {
			_ = conn.Close()
			return
		}
		if !ok {
			_ = conn.Close() // out of the rotation
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(conn)
			p.forward(conn)
		}()
	}
}

// track records a connection to forward; ok is false while the API server is
// out of the rotation, closed once the proxy is closing.
func (p *Proxy) track(c net.Conn) (ok, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, true
	}
	if p.out {
		return false, false
	}
	p.open[c] = true
	return true, false
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, c)
}

func (p *Proxy) forward(client net.Conn) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return // the API server is down: the client sees its connection closed
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(countingWriter{client, &p.down}, server)
		done <- struct{}{}
	}()
	<-done // either side closed: close both, which ends the other copy
	_ = client.Close()
	_ = server.Close()
	<-done
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
