package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

func validSpec() Spec {
	return Spec{Endpoints: []string{"127.0.0.1:2379"}, Self: Member{NodeID: "node-1", PeerAddr: "127.0.0.1:7480", Epoch: 1}}.withDefaults()
}

func TestSpecValidateNamesTheFieldOutsideItsLimit(t *testing.T) {
	cases := []struct {
		name, field string
		edit        func(*Spec)
	}{
		{"no endpoints", "catalog.Endpoints", func(s *Spec) { s.Endpoints = nil }},
		{"33 endpoints", "catalog.Endpoints", func(s *Spec) { s.Endpoints = make([]string, 33) }},
		{"an endpoint without a port", "catalog.Endpoints[1]", func(s *Spec) { s.Endpoints = []string{"a:1", "etcd"} }},
		{"an endpoint of another scheme", "catalog.Endpoints[0]", func(s *Spec) { s.Endpoints = []string{"unix://etcd:1"} }},
		{"a prefix without a trailing slash", "catalog.Prefix", func(s *Spec) { s.Prefix = "/orbitkv" }},
		{"a prefix with a space", "catalog.Prefix", func(s *Spec) { s.Prefix = "/a b/" }},
		{"a prefix of 129 bytes", "catalog.Prefix", func(s *Spec) { s.Prefix = "/" + strings.Repeat("a", 127) + "/" }},
		{"an empty node id", "catalog.Self.NodeID", func(s *Spec) { s.Self.NodeID = "" }},
		{"a node id with a slash", "catalog.Self.NodeID", func(s *Spec) { s.Self.NodeID = "a/b" }},
		{"a peer address without a port", "catalog.Self.PeerAddr", func(s *Spec) { s.Self.PeerAddr = "127.0.0.1" }},
		{"a peer address with port 0", "catalog.Self.PeerAddr", func(s *Spec) { s.Self.PeerAddr = "127.0.0.1:0" }},
		{"epoch 0", "catalog.Self.Epoch", func(s *Spec) { s.Self.Epoch = 0 }},
		{"4097 shards", "catalog.Shards", func(s *Spec) { s.Shards = 4097 }},
		{"a budget of 1 KiB", "catalog.AdvertiseBudgetBytes", func(s *Spec) { s.AdvertiseBudgetBytes = 1 << 10 }},
		{"a lease of 1s", "catalog.LeaseTTL", func(s *Spec) { s.LeaseTTL = time.Second }},
		{"a lease of 2.5s", "catalog.LeaseTTL", func(s *Spec) { s.LeaseTTL = 2500 * time.Millisecond }},
		{"a batch interval of 1ms", "catalog.BatchInterval", func(s *Spec) { s.BatchInterval = time.Millisecond }},
		{"a dial timeout of 2m", "catalog.DialTimeout", func(s *Spec) { s.DialTimeout = 2 * time.Minute }},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused as "+tc.field, func(t *testing.T) {
			s := validSpec()
			tc.edit(&s)
			fields, others := limit.Split(s.Validate())
			if len(fields) != 1 || len(others) != 0 {
				t.Fatalf("Validate = %v, %v; want one field error", fields, others)
			}
			var le *limit.Error
			if !errors.As(fields[0], &le) || le.Field != tc.field || le.Want == "" {
				t.Fatalf("Validate = %v; want a limit.Error on %s", fields[0], tc.field)
			}
		})
	}
	t.Run("the defaults are valid", func(t *testing.T) {
		if err := validSpec().Validate(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Open refuses an invalid Spec without touching etcd", func(t *testing.T) {
		s := validSpec()
		s.Self.Epoch = 0
		if _, err := Open(context.Background(), s); err == nil || !strings.Contains(err.Error(), "catalog.Self.Epoch") {
			t.Fatalf("Open = %v", err)
		}
	})
}
