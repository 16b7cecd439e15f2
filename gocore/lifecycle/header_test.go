package lifecycle

import (
	"errors"
	"io"
	"strings"
	"testing"
)

const testEpoch = 0x1122334455667788

func TestDecodeHeader(t *testing.T) {
	valid := NewHeader(CodeHealth, testEpoch, 7)
	tests := []struct {
		name    string
		mutate  func(h *Header)
		stale   bool
		wantMsg string
	}{
		{name: "a valid request header decodes", mutate: func(*Header) {}},
		{name: "a reply code decodes", mutate: func(h *Header) { h.Code = CodeUnregister.Reply() }},
		{name: "the error code decodes", mutate: func(h *Header) { h.Code = CodeError }},
		{name: "a body of exactly MaxBody bytes decodes", mutate: func(h *Header) { h.Length = MaxBody }},
		{name: "a wrong magic is malformed", mutate: func(h *Header) { h.Magic = 0x31564B4F },
			wantMsg: "frame magic 0x31564b4f differs from OKV_FRAME_MAGIC 0x46564b4f"},
		{name: "a wrong version is malformed", mutate: func(h *Header) { h.Version = 1 },
			wantMsg: "frame version 1 differs from protocol version 2"},
		{name: "code zero is malformed", mutate: func(h *Header) { h.Code = 0 },
			wantMsg: "frame code 0x0000 unknown"},
		{name: "a request code above MapDiscovery is malformed", mutate: func(h *Header) { h.Code = 7 },
			wantMsg: "frame code 0x0007 unknown"},
		{name: "the reply flag alone is malformed", mutate: func(h *Header) { h.Code = CodeReplyFlag },
			wantMsg: "frame code 0x8000 unknown"},
		{name: "a reply to an unknown request is malformed", mutate: func(h *Header) { h.Code = 0x8007 },
			wantMsg: "frame code 0x8007 unknown"},
		{name: "another epoch is stale and malformed", mutate: func(h *Header) { h.Epoch = testEpoch + 1 }, stale: true,
			wantMsg: "frame epoch 1234605616436508553 differs from Manager epoch 1234605616436508552"},
		{name: "a body one byte over MaxBody is malformed", mutate: func(h *Header) { h.Length = MaxBody + 1 },
			wantMsg: "frame body length 16777217 exceeds limit 16777216"},
		{name: "a nonzero reserved field is malformed", mutate: func(h *Header) { h.Reserved = 1 },
			wantMsg: "frame reserved 0x1 must be zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := valid
			tt.mutate(&in)
			got, err := DecodeHeader(in.AppendTo(nil), testEpoch)
			if got != in {
				t.Errorf("DecodeHeader returned %+v, want the encoded %+v", got, in)
			}
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("DecodeHeader: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeHeader error %v does not wrap ErrMalformed", err)
			}
			if got := errors.Is(err, ErrStaleEpoch); got != tt.stale {
				t.Errorf("errors.Is(%v, ErrStaleEpoch) = %v, want %v", err, got, tt.stale)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("DecodeHeader error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestDecodeHeaderShortInput(t *testing.T) {
	for n := 0; n < HeaderSize; n++ {
		b := NewHeader(CodeHealth, testEpoch, 0).AppendTo(nil)[:n]
		_, err := DecodeHeader(b, testEpoch)
		if !errors.Is(err, ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("DecodeHeader of %d bytes: error %v, want ErrMalformed and io.ErrUnexpectedEOF", n, err)
		}
	}
}

func TestHeaderAppendToLayout(t *testing.T) {
	h := Header{Magic: Magic, Version: Version, Code: CodeRegisterBuffers.Reply(), Epoch: 0x0102030405060708, Length: 0x0a0b0c0d, Reserved: 0}
	got := h.AppendTo([]byte{0xEE})
	want := []byte{
		0xEE,                   // existing prefix is kept
		0x4F, 0x4B, 0x56, 0x46, // magic "OKVF"
		0x02, 0x00, // version 2
		0x02, 0x80, // code 0x8002
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // epoch
		0x0d, 0x0c, 0x0b, 0x0a, // length
		0x00, 0x00, 0x00, 0x00, // reserved
	}
	if string(got) != string(want) {
		t.Fatalf("AppendTo = % x\nwant       % x", got, want)
	}
}

func TestCode(t *testing.T) {
	tests := []struct {
		code  Code
		name  string
		known bool
		reply bool
	}{
		{CodeRegisterInstance, "RegisterInstance", true, false},
		{CodeRegisterBuffers, "RegisterBuffers", true, false},
		{CodeHealth, "Health", true, false},
		{CodeWatchSession, "WatchSession", true, false},
		{CodeUnregister, "Unregister", true, false},
		{CodeHealth.Reply(), "Health reply", true, true},
		{CodeUnregister | CodeReplyFlag, "Unregister reply", true, true},
		{CodeError, "Error", true, false},
		{0, "Code(0x0000)", false, false},
		{CodeMapDiscovery, "MapDiscovery", true, false},
		{7, "Code(0x0007)", false, false},
		{CodeReplyFlag, "Code(0x8000)", false, true},
		{0x7fff, "Code(0x7fff)", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is named, classified and mapped to its request", func(t *testing.T) {
			if got := tt.code.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if got := tt.code.Known(); got != tt.known {
				t.Errorf("Known() = %v, want %v", got, tt.known)
			}
			if got := tt.code.IsReply(); got != tt.reply {
				t.Errorf("IsReply() = %v, want %v", got, tt.reply)
			}
			if tt.known && tt.code != CodeError && tt.code.Request().Reply() != tt.code|CodeReplyFlag {
				t.Errorf("Request().Reply() = %v, want %v", tt.code.Request().Reply(), tt.code|CodeReplyFlag)
			}
		})
	}
}
