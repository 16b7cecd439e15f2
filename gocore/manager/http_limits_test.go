package manager

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Idle keep-alive connections to the HTTP port cannot take the Manager's
// file descriptors: at most MaxHTTPConns are served at once, the rest wait
// in the kernel's accept queue (no descriptor of the Manager's), and a
// connection idle past HTTPIdleTimeout is closed.
func TestHTTPConnectionsAreBounded(t *testing.T) {
	m, err := New(testSpec(t, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := m.http.addr
	const extra = 16
	served := 0
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < MaxHTTPConns+extra; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
			served++
		}
	}
	if served != MaxHTTPConns {
		t.Fatalf("%d keep-alive connections served at once, want MaxHTTPConns (%d)", served, MaxHTTPConns)
	}
}

// /debug/pprof is served only when asked for (HTTPPprof): profiles and
// goroutine dumps show every engine's activity to any local process.
func TestPprofIsOffUnlessAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := testSpec(t, "127.0.0.1:0")
		s.HTTPPprof = on
		m, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + m.http.addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			m.Close()
			t.Fatal(err)
		}
		resp.Body.Close()
		m.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
			t.Errorf("HTTPPprof %v: GET /debug/pprof/goroutine = %d, want %d", on, resp.StatusCode, want)
		}
	}
}

// A request that declares a body (which no endpoint reads) is answered 400
// at once and its connection closed: a body declared and never sent
// cannot hold one of the MaxHTTPConns connections.
func TestARequestWithABodyIsRefusedAndItsConnectionClosed(t *testing.T) {
	m, err := New(testSpec(t, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := net.DialTimeout("tcp", m.http.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a request whose body never comes: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal the connection read %v, want io.EOF (closed at once)", err)
	}
}
