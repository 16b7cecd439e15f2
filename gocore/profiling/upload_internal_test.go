package profiling

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestUploadsBoundWhatTheServerSends(t *testing.T) {
	const sent = 64 << 20 // far beyond any ingest answer
	tests := []struct {
		name   string
		status int
	}{
		{"a huge answer to an accepted upload is read no further than the limit", http.StatusOK},
		{"a huge answer to a refused upload is read no further than the limit", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				chunk := []byte(strings.Repeat("x", 1<<20))
				for range sent >> 20 {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			u := &uploads{c: srv.Client(), log: slog.New(slog.DiscardHandler), url: srv.URL, ctx: context.Background()}
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/ingest", strings.NewReader("profile"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := u.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, resp.Body)
			if n > maxReplyBytes {
				t.Errorf("read %d bytes of the answer, want at most %d", n, maxReplyBytes)
			}
		})
	}
}

func TestStopIsBoundedWhenTheServerHangs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	p, err := Start(Spec{URL: "http://" + ln.Addr().String(), UploadInterval: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // uploads in flight, more queued
	start := time.Now()
	p.Stop()
	if d := time.Since(start); d > uploadTimeout+3*time.Second {
		t.Errorf("Stop took %v against a server that never answers, want at most about uploadTimeout (%v)", d, uploadTimeout)
	}
}
