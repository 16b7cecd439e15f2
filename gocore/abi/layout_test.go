package abi_test

import (
	"testing"
	"unsafe"

	. "github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// TestLayoutMatchesC proves the Go mirrors and the offsets Go code writes by
// hand against the layouts the C compiler produced from abi.h
// (CONTRIBUTING.md habit 13).
func TestLayoutMatchesC(t *testing.T) {
	c := native.Layout()
	if len(c) == 0 {
		t.Skip("built without cgo: native.Layout has no C values to compare against")
	}
	var m Message
	var h Hello
	var r HelloReply
	tests := []struct {
		name string
		c    string  // key of native.Layout
		got  uintptr // Go value
	}{
		{"the message is 64 bytes", "sizeof(okv_msg)", unsafe.Sizeof(m)},
		{"MessageSize is sizeof(okv_msg)", "sizeof(okv_msg)", MessageSize},
		{"message magic", "okv_msg.magic", unsafe.Offsetof(m.Magic)},
		{"message abi_version", "okv_msg.abi_version", unsafe.Offsetof(m.ABIVersion)},
		{"message code", "okv_msg.code", unsafe.Offsetof(m.Code)},
		{"message request_id", "okv_msg.request_id", unsafe.Offsetof(m.RequestID)},
		{"message epoch", "okv_msg.epoch", unsafe.Offsetof(m.Epoch)},
		{"message desc_offset", "okv_msg.desc_offset", unsafe.Offsetof(m.DescOffset)},
		{"message desc_length", "okv_msg.desc_length", unsafe.Offsetof(m.DescLength)},
		{"message generation", "okv_msg.generation", unsafe.Offsetof(m.Generation)},
		{"message arg0", "okv_msg.arg0", unsafe.Offsetof(m.Arg0)},
		{"message arg1", "okv_msg.arg1", unsafe.Offsetof(m.Arg1)},
		{"message reserved", "okv_msg.reserved", unsafe.Offsetof(m.Reserved)},

		{"the hello is HelloSize bytes", "sizeof(okv_hello)", unsafe.Sizeof(h)},
		{"HelloSize is sizeof(okv_hello)", "sizeof(okv_hello)", HelloSize},
		{"hello protocol_version", "okv_hello.protocol_version", unsafe.Offsetof(h.ProtocolVersion)},
		{"hello abi_version", "okv_hello.abi_version", unsafe.Offsetof(h.ABIVersion)},
		{"hello pid", "okv_hello.pid", unsafe.Offsetof(h.PID)},
		{"hello role", "okv_hello.role", unsafe.Offsetof(h.Role)},
		{"hello instance_id", "okv_hello.instance_id", unsafe.Offsetof(h.InstanceID)},
		{"hello reserved", "okv_hello.reserved", unsafe.Offsetof(h.Reserved)},

		{"the hello reply is HelloReplySize bytes", "sizeof(okv_hello_reply)", unsafe.Sizeof(r)},
		{"HelloReplySize is sizeof(okv_hello_reply)", "sizeof(okv_hello_reply)", HelloReplySize},
		{"reply status", "okv_hello_reply.status", unsafe.Offsetof(r.Status)},
		{"reply epoch", "okv_hello_reply.epoch", unsafe.Offsetof(r.Epoch)},
		{"reply service_id", "okv_hello_reply.service_id", unsafe.Offsetof(r.ServiceID)},
		{"reply client_token", "okv_hello_reply.client_token", unsafe.Offsetof(r.ClientToken)},
		{"reply initial_generation", "okv_hello_reply.initial_generation", unsafe.Offsetof(r.InitialGeneration)},
		{"reply slot_index", "okv_hello_reply.slot_index", unsafe.Offsetof(r.SlotIndex)},
		{"reply slot_bytes", "okv_hello_reply.slot_bytes", unsafe.Offsetof(r.SlotBytes)},
		{"reply desc_offset", "okv_hello_reply.desc_offset", unsafe.Offsetof(r.DescOffset)},
		{"reply desc_capacity", "okv_hello_reply.desc_capacity", unsafe.Offsetof(r.DescCapacity)},
		{"reply max_frame_body", "okv_hello_reply.max_frame_body", unsafe.Offsetof(r.MaxFrameBody)},
		{"reply manager_pid", "okv_hello_reply.manager_pid", unsafe.Offsetof(r.ManagerPID)},
		{"reply max_sessions", "okv_hello_reply.max_sessions", unsafe.Offsetof(r.MaxSessions)},
		{"reply ext_bytes", "okv_hello_reply.ext_bytes", unsafe.Offsetof(r.ExtBytes)},
		{"reply ext_fds", "okv_hello_reply.ext_fds", unsafe.Offsetof(r.ExtFDs)},
		{"reply error", "okv_hello_reply.error", unsafe.Offsetof(r.Error)},

		// The slot has no Go struct: gocore/session writes its header with
		// literal offsets and the request/response lines sit at fixed lines.
		{"the slot control page is SlotDescOffset bytes", "sizeof(okv_slot)", SlotDescOffset},
		{"the request line is line 1", "okv_slot.request", 1 * CacheLine},
		{"the response line is line 2", "okv_slot.response", 2 * CacheLine},
		{"the wait line is line 3", "okv_slot.wait", 3 * CacheLine},
		{"slot header slot_bytes (session writes 8)", "okv_slot_header.slot_bytes", 8},
		{"slot header slot_index (session writes 12)", "okv_slot_header.slot_index", 12},
		{"slot header desc_offset (session writes 16)", "okv_slot_header.desc_offset", 16},
		{"slot header desc_capacity (session writes 20)", "okv_slot_header.desc_capacity", 20},
		{"slot header epoch (session writes 24)", "okv_slot_header.epoch", 24},
		{"slot header initial_generation (session writes 32)", "okv_slot_header.initial_generation", 32},

		// The doorbell likewise: gocore/channel writes its header by offset.
		{"DoorbellSize is sizeof(okv_doorbell)", "sizeof(okv_doorbell)", DoorbellSize},
		{"doorbell max_sessions (channel writes 8)", "okv_doorbell.max_sessions", 8},
		{"doorbell epoch (channel writes 16)", "okv_doorbell.epoch", 16},
		{"doorbell seq is line 1", "okv_doorbell.seq", 1 * CacheLine},
		{"doorbell server_parked is line 2", "okv_doorbell.server_parked", 2 * CacheLine},
		{"doorbell summary is line 3", "okv_doorbell.summary", 3 * CacheLine},
		{"doorbell pending starts at line 4", "okv_doorbell.pending", 4 * CacheLine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, ok := c[tc.c]
			if !ok {
				t.Fatalf("native.Layout has no %q", tc.c)
			}
			if tc.got != want {
				t.Errorf("%s: Go %d, C %d", tc.c, tc.got, want)
			}
		})
	}
	t.Run("the pending words fill the doorbell", func(t *testing.T) {
		if c["sizeof(okv_doorbell)"]-c["okv_doorbell.pending"] != 8*DoorbellWords {
			t.Errorf("pending area %d bytes, want %d", c["sizeof(okv_doorbell)"]-c["okv_doorbell.pending"], 8*DoorbellWords)
		}
		if MaxSessions != 64*DoorbellWords || ControlSlot != MaxSessions-1 {
			t.Errorf("MaxSessions %d ControlSlot %d do not follow from %d words", MaxSessions, ControlSlot, DoorbellWords)
		}
	})
}

// TestDescriptorOffsetsMatchC proves the offsets the descriptor decoders
// read against abi.h's descriptor structs.
func TestDescriptorOffsetsMatchC(t *testing.T) {
	c := native.Layout()
	if len(c) == 0 {
		t.Skip("built without cgo: native.Layout has no C values to compare against")
	}
	for name, off := range DescOffsets {
		cv, ok := c[name]
		if !ok {
			t.Errorf("%s: not in native.Layout", name)
			continue
		}
		if cv != off {
			t.Errorf("%s: Go %d, C %d", name, off, cv)
		}
	}
}

// TestDescriptorConstantsMatchC compares magics, schemas and limits.
func TestDescriptorConstantsMatchC(t *testing.T) {
	c := native.Layout()
	if len(c) == 0 {
		t.Skip("built without cgo")
	}
	for name, v := range map[string]uintptr{
		"OKV_QUERY_MAGIC": QueryMagic, "OKV_QUERY_RESULT_MAGIC": QueryResultMagic,
		"OKV_PUBLISH_MAGIC": PublishMagic, "OKV_RESTORE_MAGIC": RestoreMagic,
		"OKV_QUERY_SCHEMA": QuerySchema, "OKV_PUBLISH_SCHEMA": PublishSchema, "OKV_RESTORE_SCHEMA": RestoreSchema,
		"OKV_QUERY_FLAGS_ALL": QueryFlagsAll, "OKV_FIELD_MAX": uintptr(FieldRecord),
		"OKV_PUBLISH_SCHEMA_V1": PublishSchemaV1, "OKV_PUBLISH_FLAGS_ALL": PublishFlagsAll,
		"OKV_RECORD_FLAGS_ALL": RecordFlagsAll, "OKV_RECORD_MAX_TOKENS": RecordMaxTokens,
	} {
		if c[name] != v {
			t.Errorf("%s: Go %#x, C %#x", name, v, c[name])
		}
	}
}
