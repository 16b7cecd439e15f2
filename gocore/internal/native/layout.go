//go:build cgo

package native

/*
#include <stddef.h>
#include "orbitkv/abi.h"
#include "orbitkv/client.h"
#include "server.h"
#include "copy.h"
#include "pingpong.h"

#define OKVL_OFF(t, f) offsetof(struct t, f)
static const size_t okvl_values[] = {
	sizeof(struct okv_msg),
	OKVL_OFF(okv_msg, magic), OKVL_OFF(okv_msg, abi_version), OKVL_OFF(okv_msg, code),
	OKVL_OFF(okv_msg, request_id), OKVL_OFF(okv_msg, epoch), OKVL_OFF(okv_msg, desc_offset),
	OKVL_OFF(okv_msg, desc_length), OKVL_OFF(okv_msg, generation), OKVL_OFF(okv_msg, arg0),
	OKVL_OFF(okv_msg, arg1), OKVL_OFF(okv_msg, reserved),
	sizeof(struct okv_hello),
	OKVL_OFF(okv_hello, protocol_version), OKVL_OFF(okv_hello, abi_version),
	OKVL_OFF(okv_hello, pid), OKVL_OFF(okv_hello, role), OKVL_OFF(okv_hello, instance_id),
	OKVL_OFF(okv_hello, reserved),
	sizeof(struct okv_hello_reply),
	OKVL_OFF(okv_hello_reply, status), OKVL_OFF(okv_hello_reply, epoch),
	OKVL_OFF(okv_hello_reply, service_id), OKVL_OFF(okv_hello_reply, client_token),
	OKVL_OFF(okv_hello_reply, initial_generation), OKVL_OFF(okv_hello_reply, slot_index),
	OKVL_OFF(okv_hello_reply, slot_bytes), OKVL_OFF(okv_hello_reply, desc_offset),
	OKVL_OFF(okv_hello_reply, desc_capacity), OKVL_OFF(okv_hello_reply, max_frame_body),
	OKVL_OFF(okv_hello_reply, manager_pid), OKVL_OFF(okv_hello_reply, max_sessions),
	OKVL_OFF(okv_hello_reply, ext_bytes), OKVL_OFF(okv_hello_reply, ext_fds),
	OKVL_OFF(okv_hello_reply, error),
	sizeof(struct okv_slot), OKVL_OFF(okv_slot, request), OKVL_OFF(okv_slot, response),
	OKVL_OFF(okv_slot, wait), OKVL_OFF(okv_slot_header, slot_bytes),
	OKVL_OFF(okv_slot_header, slot_index), OKVL_OFF(okv_slot_header, desc_offset),
	OKVL_OFF(okv_slot_header, desc_capacity), OKVL_OFF(okv_slot_header, epoch),
	OKVL_OFF(okv_slot_header, initial_generation),
	sizeof(struct okv_doorbell), OKVL_OFF(okv_doorbell, max_sessions),
	OKVL_OFF(okv_doorbell, epoch), OKVL_OFF(okv_doorbell, seq),
	OKVL_OFF(okv_doorbell, server_parked), OKVL_OFF(okv_doorbell, summary),
	OKVL_OFF(okv_doorbell, pending),
	sizeof(struct okvi_event), OKVL_OFF(okvi_event, prev_gen), OKVL_OFF(okvi_event, msg),
	sizeof(struct okvi_reply), OKVL_OFF(okvi_reply, msg),
	sizeof(struct okvi_copy_seg), OKVL_OFF(okvi_copy_seg, src), OKVL_OFF(okvi_copy_seg, dst),
	OKVL_OFF(okvi_copy_seg, len),
	sizeof(struct okvi_copy_completion), OKVL_OFF(okvi_copy_completion, token),
	OKVL_OFF(okvi_copy_completion, status), OKVL_OFF(okvi_copy_completion, reserved),
	OKVL_OFF(okvi_copy_completion, bytes),
	sizeof(struct okv_namespace), sizeof(struct okv_block_hash),
	sizeof(struct okv_restore_entry), OKVL_OFF(okv_restore_entry, page),
	sizeof(struct okv_query_desc), OKVL_OFF(okv_query_desc, flags), OKVL_OFF(okv_query_desc, op_id), OKVL_OFF(okv_query_desc, revision), OKVL_OFF(okv_query_desc, hash_count), OKVL_OFF(okv_query_desc, request_id), OKVL_OFF(okv_query_desc, group), OKVL_OFF(okv_query_desc, recovery_first), OKVL_OFF(okv_query_desc, recovery_count), OKVL_OFF(okv_query_desc, ns), sizeof(struct okv_query_result), OKVL_OFF(okv_query_result, status), OKVL_OFF(okv_query_result, hit_count), OKVL_OFF(okv_query_result, lease_id), OKVL_OFF(okv_query_result, lease_bytes), OKVL_OFF(okv_query_result, block_bytes), OKVL_OFF(okv_query_result, ram_hits), OKVL_OFF(okv_query_result, op_id), OKVL_OFF(okv_query_result, revision), OKVL_OFF(okv_query_result, first), sizeof(struct okv_publish_desc), OKVL_OFF(okv_publish_desc, buffer_id), OKVL_OFF(okv_publish_desc, count), OKVL_OFF(okv_publish_desc, ns), OKVL_OFF(okv_publish_desc, layer_first), OKVL_OFF(okv_publish_desc, layer_count), OKVL_OFF(okv_publish_desc, reserved), sizeof(struct okv_publish_entry), OKVL_OFF(okv_publish_entry, hash), OKVL_OFF(okv_publish_entry, page), OKVL_OFF(okv_publish_entry, reserved), sizeof(struct okv_block_record), OKVL_OFF(okv_block_record, parent_hash), OKVL_OFF(okv_block_record, flags), OKVL_OFF(okv_block_record, token_count), sizeof(struct okv_restore_desc), OKVL_OFF(okv_restore_desc, buffer_id), OKVL_OFF(okv_restore_desc, count), OKVL_OFF(okv_restore_desc, lease_id), OKVL_OFF(okv_restore_desc, reserved), OKVL_OFF(okv_restore_entry, block),
	OKV_QUERY_MAGIC, OKV_QUERY_RESULT_MAGIC, OKV_PUBLISH_MAGIC, OKV_RESTORE_MAGIC, OKV_QUERY_SCHEMA, OKV_PUBLISH_SCHEMA, OKV_RESTORE_SCHEMA, OKV_QUERY_FLAGS_ALL, OKV_FIELD_MAX,
	OKV_PUBLISH_SCHEMA_V1, OKV_PUBLISH_FLAGS_ALL, OKV_RECORD_FLAGS_ALL, OKV_RECORD_MAX_TOKENS,
};
static const long long okvl_enums[] = {
	OKVI_POLL_SPIN, OKVI_POLL_ADAPTIVE, OKVI_POLL_PARK, OKVI_EV_REQUEST, OKVI_EV_CONTROL,
	OKV_EPROTO, OKV_EVERSION, OKV_EREFUSED, OKV_ESTALE_SESSION, OKV_ESTALE_GENERATION,
	OKV_EINVALID, OKV_ETIMEDOUT, OKV_EMANAGER_DIED, OKV_ECLOSED, OKV_EINTERNAL,
	OKV_EUNSUPPORTED, OKV_EAPPLICATION, OKV_EPENDING, OKV_EUNADMITTED, OKV_E2BIG,
	OKVB_SHM_SPIN, OKVB_FUTEX, OKVB_UDS, OKVB_IOX2,
	OKV_EEXPIRED, OKV_EFENCED, OKV_EDISCOVER_BUSY,
	OKV_QUERY_WAIT_FOR_FULL_PREFIX, OKV_QUERY_WARMUP, OKV_QUERY_DISCOVER, OKV_QUERY_RECOVERY,
	OKV_QUERY_PREPARE,
	OKV_STATUS_OK, OKV_STATUS_LOADING, OKV_STATUS_MISS, OKV_STATUS_CANDIDATES,
};
static long long okvl_enum(int i) { return okvl_enums[i]; }
static int okvl_enum_count(void) { return (int)(sizeof(okvl_enums) / sizeof(okvl_enums[0])); }
static size_t okvl_value(int i) { return okvl_values[i]; }
static int okvl_count(void) { return (int)(sizeof(okvl_values) / sizeof(okvl_values[0])); }
*/
import "C"

import "fmt"

// layoutNames lists okvl_values in order.
var layoutNames = []string{
	"sizeof(okv_msg)",
	"okv_msg.magic", "okv_msg.abi_version", "okv_msg.code",
	"okv_msg.request_id", "okv_msg.epoch", "okv_msg.desc_offset",
	"okv_msg.desc_length", "okv_msg.generation", "okv_msg.arg0",
	"okv_msg.arg1", "okv_msg.reserved",
	"sizeof(okv_hello)",
	"okv_hello.protocol_version", "okv_hello.abi_version",
	"okv_hello.pid", "okv_hello.role", "okv_hello.instance_id",
	"okv_hello.reserved",
	"sizeof(okv_hello_reply)",
	"okv_hello_reply.status", "okv_hello_reply.epoch",
	"okv_hello_reply.service_id", "okv_hello_reply.client_token",
	"okv_hello_reply.initial_generation", "okv_hello_reply.slot_index",
	"okv_hello_reply.slot_bytes", "okv_hello_reply.desc_offset",
	"okv_hello_reply.desc_capacity", "okv_hello_reply.max_frame_body",
	"okv_hello_reply.manager_pid", "okv_hello_reply.max_sessions",
	"okv_hello_reply.ext_bytes", "okv_hello_reply.ext_fds",
	"okv_hello_reply.error",
	"sizeof(okv_slot)", "okv_slot.request", "okv_slot.response",
	"okv_slot.wait", "okv_slot_header.slot_bytes",
	"okv_slot_header.slot_index", "okv_slot_header.desc_offset",
	"okv_slot_header.desc_capacity", "okv_slot_header.epoch",
	"okv_slot_header.initial_generation",
	"sizeof(okv_doorbell)", "okv_doorbell.max_sessions",
	"okv_doorbell.epoch", "okv_doorbell.seq",
	"okv_doorbell.server_parked", "okv_doorbell.summary",
	"okv_doorbell.pending",
	"sizeof(okvi_event)", "okvi_event.prev_gen", "okvi_event.msg",
	"sizeof(okvi_reply)", "okvi_reply.msg",
	"sizeof(okvi_copy_seg)", "okvi_copy_seg.src", "okvi_copy_seg.dst",
	"okvi_copy_seg.len",
	"sizeof(okvi_copy_completion)", "okvi_copy_completion.token",
	"okvi_copy_completion.status", "okvi_copy_completion.reserved",
	"okvi_copy_completion.bytes",
	"sizeof(okv_namespace)", "sizeof(okv_block_hash)",
	"sizeof(okv_restore_entry)", "okv_restore_entry.page",
	"sizeof(okv_query_desc)", "okv_query_desc.flags", "okv_query_desc.op_id", "okv_query_desc.revision", "okv_query_desc.hash_count", "okv_query_desc.request_id", "okv_query_desc.group", "okv_query_desc.recovery_first", "okv_query_desc.recovery_count", "okv_query_desc.ns", "sizeof(okv_query_result)", "okv_query_result.status", "okv_query_result.hit_count", "okv_query_result.lease_id", "okv_query_result.lease_bytes", "okv_query_result.block_bytes", "okv_query_result.ram_hits", "okv_query_result.op_id", "okv_query_result.revision", "okv_query_result.first", "sizeof(okv_publish_desc)", "okv_publish_desc.buffer_id", "okv_publish_desc.count", "okv_publish_desc.ns", "okv_publish_desc.layer_first", "okv_publish_desc.layer_count", "okv_publish_desc.reserved", "sizeof(okv_publish_entry)", "okv_publish_entry.hash", "okv_publish_entry.page", "okv_publish_entry.reserved", "sizeof(okv_block_record)", "okv_block_record.parent_hash", "okv_block_record.flags", "okv_block_record.token_count", "sizeof(okv_restore_desc)", "okv_restore_desc.buffer_id", "okv_restore_desc.count", "okv_restore_desc.lease_id", "okv_restore_desc.reserved", "okv_restore_entry.block",
	"OKV_QUERY_MAGIC", "OKV_QUERY_RESULT_MAGIC", "OKV_PUBLISH_MAGIC", "OKV_RESTORE_MAGIC", "OKV_QUERY_SCHEMA", "OKV_PUBLISH_SCHEMA", "OKV_RESTORE_SCHEMA", "OKV_QUERY_FLAGS_ALL", "OKV_FIELD_MAX",
	"OKV_PUBLISH_SCHEMA_V1", "OKV_PUBLISH_FLAGS_ALL", "OKV_RECORD_FLAGS_ALL", "OKV_RECORD_MAX_TOKENS",
}

// Layout returns the sizes and offsets of the shared layouts as the C
// compiler laid them out, keyed "struct.field" (offset in bytes) and
// "sizeof(struct)" (bytes). gocore/abi's layout test compares its Go mirrors
// against these values.
func Layout() map[string]uintptr {
	n := int(C.okvl_count())
	if n != len(layoutNames) {
		panic(fmt.Sprintf("native: layout table has %d C values and %d names", n, len(layoutNames)))
	}
	m := make(map[string]uintptr, n)
	for i, name := range layoutNames {
		m[name] = uintptr(C.okvl_value(C.int(i)))
	}
	return m
}

// enumNames lists okvl_enums in order, with the Go value that must match.
var enumNames = []struct {
	name    string
	goValue int64
}{
	{"OKVI_POLL_SPIN", int64(PollSpin)}, {"OKVI_POLL_ADAPTIVE", int64(PollAdaptive)},
	{"OKVI_POLL_PARK", int64(PollPark)}, {"OKVI_EV_REQUEST", int64(EventRequest)},
	{"OKVI_EV_CONTROL", int64(EventControl)},
	{"OKV_EPROTO", CodeProto}, {"OKV_EVERSION", CodeVersion}, {"OKV_EREFUSED", CodeRefused},
	{"OKV_ESTALE_SESSION", CodeStaleSession}, {"OKV_ESTALE_GENERATION", CodeStaleGen},
	{"OKV_EINVALID", CodeInvalid}, {"OKV_ETIMEDOUT", CodeTimedOut},
	{"OKV_EMANAGER_DIED", CodeManagerDied}, {"OKV_ECLOSED", CodeClosed},
	{"OKV_EINTERNAL", CodeInternal}, {"OKV_EUNSUPPORTED", CodeUnsupported},
	{"OKV_EAPPLICATION", CodeApplication}, {"OKV_EPENDING", CodePending},
	{"OKV_EUNADMITTED", CodeUnadmitted}, {"OKV_E2BIG", Code2Big},
	{"OKVB_SHM_SPIN", int64(BenchShmSpin)}, {"OKVB_FUTEX", int64(BenchFutex)},
	{"OKVB_UDS", int64(BenchUDS)}, {"OKVB_IOX2", int64(BenchIceoryx2)},
	{"OKV_EEXPIRED", CodeExpired}, {"OKV_EFENCED", CodeFenced}, {"OKV_EDISCOVER_BUSY", CodeDiscoverBusy},
	{"OKV_QUERY_WAIT_FOR_FULL_PREFIX", int64(QueryWaitForFullPrefix)}, {"OKV_QUERY_WARMUP", int64(QueryWarmup)},
	{"OKV_QUERY_DISCOVER", int64(QueryDiscover)}, {"OKV_QUERY_RECOVERY", int64(QueryRecovery)},
	{"OKV_QUERY_PREPARE", int64(QueryPrepare)},
	{"OKV_STATUS_OK", int64(StatusOK)}, {"OKV_STATUS_LOADING", int64(StatusLoading)},
	{"OKV_STATUS_MISS", int64(StatusMiss)}, {"OKV_STATUS_CANDIDATES", int64(StatusCandidates)},
}

// EnumMismatches compares the Go constants of this package (codes, poll
// modes, event kinds, bench kinds, ticket codes, query flags and statuses)
// with the C enum values they mirror and returns one line per difference
// (nil when equal). It is the one Go-vs-C enum table (TestEnumsMatchC).
func EnumMismatches() []string {
	n := int(C.okvl_enum_count())
	if n != len(enumNames) {
		return []string{fmt.Sprintf("C has %d enum values, Go lists %d", n, len(enumNames))}
	}
	var out []string
	for i, e := range enumNames {
		if c := int64(C.okvl_enum(C.int(i))); c != e.goValue {
			out = append(out, fmt.Sprintf("%s: C %d, Go %d", e.name, c, e.goValue))
		}
	}
	return out
}
