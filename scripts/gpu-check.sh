#!/usr/bin/env bash
# gpu-check.sh — the CUDA copy backend on a real GPU.
#
# NOT RUN YET: no GPU machine was available when this script was written,
# so every GPU row of docs/cuda.md is open. Nothing claims it passed.
#
# For a GPU machine with the NVIDIA driver (libcuda.so.1), nvcc and torch,
# and no Go toolchain and no network. On the CPU machine, `make gpu-bundle`
# builds what travels (build/gpu-bundle.tar.gz, under 64 MiB): the Manager,
# okv_gpu_check (the backend through the copy engine, native/tests/gpu/),
# this script, fault.cu, gpu_ipc_probe.py, gpu_kv_check.py, the Python
# package and liborbitkv. On the GPU machine:
#
#   tar xzf gpu-bundle.tar.gz && cd gpu-bundle && ./gpu-check.sh [OUTDIR]
#
# It compiles only fault.cu (nvcc -ptx), then runs, each under a timeout,
# in about 2 minutes on an H200-class device:
#   1. roundtrip: H2D then D2H through the backend, 64 KiB..2 MiB blocks,
#      every byte compared;
#   2. bench: engine H2D/D2H GB/s beside plain cuMemcpyAsync of the same
#      page-locked buffers on one stream, same run, ratio per block size;
#   3. fault: a kernel writing through a wild pointer behind a copy job in
#      flight; the process must die by SIGABRT with
#      "orbitkv-manager: fail-stop:" on stderr (docs/design.md §6 rule 9);
#   4. manager: orbitkv-manager --copy-backend cuda starts (the RAM tier
#      page-locked) and stops on SIGTERM;
#   5. ipc: torch allocates in one process, another opens it by legacy IPC
#      handle and reads the same bytes; on a sandboxed kernel the exact
#      driver error is printed.
#   6. kv: torch allocates the KV cache in one process and registers it by
#      IPC handle with a Manager on --copy-backend cuda (another process),
#      which publishes from it (D2H) and restores into it (H2D); bytes
#      compared on the device (gpu_kv_check.py).
#   7. manager-fault: the Manager's failpoint build (orbitkv-manager-fp,
#      --copy-backend cuda) copies torch KV of another process by IPC
#      handle; the device fault is armed through its loopback HTTP control
#      (POST /debug/failpoints/cuda-device-fault?module=fault.ptx) and the
#      next publish's copy job launches fault.cu's kernel ahead of its
#      copies: the Manager must end in fail-stop (death by SIGABRT, or the
#      SIGQUIT Go's crash traceback relays among its threads, with
#      "orbitkv-manager: fail-stop:" in its log) and the publish must fail.
#
# Output: OUTDIR (default ./gpu-check-out) holds each step's log and
# summary.txt; exit status 0 only when every step passed.
#
# No -e: each step's failure is expected and recorded (its status is read
# from $? on the next line, a killed Manager's from wait), and the script
# goes on to the next step.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$PWD/gpu-check-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
fail=0
row() { echo "$1: $2" | tee -a "$summary"; [ "$2" = pass ] || [ "${2%% *}" = skip ] || fail=1; }

bin=$here/bin
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$out/nvidia-smi.txt"
cat "$out/nvidia-smi.txt"

if ! command -v nvcc >/dev/null; then
	row fault-build "fail (no nvcc on PATH)"
elif nvcc -ptx "$here/fault.cu" -o "$out/fault.ptx" >"$out/nvcc.log" 2>&1; then
	row fault-build pass
else
	row fault-build "fail (nvcc: $(tail -1 "$out/nvcc.log"))"
fi

timeout 120 "$bin/okv_gpu_check" roundtrip >"$out/roundtrip.log" 2>&1
rc=$?; [ $rc = 0 ] && row roundtrip pass || row roundtrip "fail (exit $rc: $(tail -1 "$out/roundtrip.log"))"

timeout 180 "$bin/okv_gpu_check" bench >"$out/bench.log" 2>&1
rc=$?; [ $rc = 0 ] && row bench pass || row bench "fail (exit $rc: $(tail -1 "$out/bench.log"))"
cat "$out/bench.log"

if [ -f "$out/fault.ptx" ]; then
	timeout 120 "$bin/okv_gpu_check" fault "$out/fault.ptx" >"$out/fault.log" 2>&1
	rc=$?
	if [ $rc = 134 ] && grep -q "orbitkv-manager: fail-stop:" "$out/fault.log"; then
		row fault "pass ($(grep -m1 -o 'fail-stop: .*' "$out/fault.log"))"
		sed -i 's/^fault: pass (/fault: pass\n  (/' "$summary"
	else
		row fault "fail (exit $rc, want 134 = SIGABRT with a fail-stop line; see fault.log)"
	fi
else
	row fault "fail (no fault.ptx)"
fi

sock=$out/m.sock
timeout 60 "$bin/orbitkv-manager" --copy-backend cuda --bootstrap-socket "$sock" --http-addr "" \
	--ram-capacity 1GiB --hugepages off >"$out/manager.log" 2>&1 &
mpid=$!
for _ in $(seq 1 300); do grep -q "backend=cuda" "$out/manager.log" && break; sleep 0.1; done
sleep 1
kill -TERM $mpid 2>/dev/null
wait $mpid
rc=$?
if grep -q "backend=cuda" "$out/manager.log" && [ $rc = 0 ]; then
	row manager pass
else
	row manager "fail (exit $rc: $(grep -m1 -E 'ERROR|error' "$out/manager.log"))"
fi

if python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
	timeout 120 python3 "$here/gpu_ipc_probe.py" >"$out/ipc.log" 2>&1
	rc=$?; [ $rc = 0 ] && row ipc pass || row ipc "fail ($(tail -1 "$out/ipc.log"))"
else
	row ipc "fail (torch with CUDA not importable)"
fi
# The Manager copies KV torch allocated in this process (IPC handle).
if python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
	timeout 60 "$bin/orbitkv-manager" --copy-backend cuda --bootstrap-socket "$out/kv.sock" --http-addr "" \
		--ram-capacity 2GiB --hugepages off >"$out/kv-manager.log" 2>&1 &
	kpid=$!
	for _ in $(seq 1 300); do grep -q "orbitkv-manager serving" "$out/kv-manager.log" && break; sleep 0.1; done
	PYTHONPATH=$here/python ORBITKV_LIB=$here/lib/liborbitkv.so.0 timeout 120 python3 "$here/gpu_kv_check.py" "$out/kv.sock" >"$out/kv.log" 2>&1
	rc=$?
	kill -TERM $kpid 2>/dev/null
	wait $kpid
	[ $rc = 0 ] && row manager-copies-torch-kv "pass ($(tail -1 "$out/kv.log"))" || row manager-copies-torch-kv "fail ($(tail -1 "$out/kv.log"))"
else
	row manager-copies-torch-kv "fail (torch with CUDA not importable)"
fi

# The Manager itself in fail-stop: a device fault armed through the
# failpoint build while it copies torch KV of this machine's other process.
if [ ! -f "$out/fault.ptx" ]; then
	row manager-fault "fail (no fault.ptx)"
elif ! python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
	row manager-fault "fail (torch with CUDA not importable)"
else
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	timeout 90 "$bin/orbitkv-manager-fp" --copy-backend cuda --bootstrap-socket "$out/fault.sock" \
		--http-addr "127.0.0.1:$port" --ram-capacity 1GiB --hugepages off >"$out/fault-manager.log" 2>&1 &
	fpid=$!
	for _ in $(seq 1 300); do grep -q "orbitkv-manager serving" "$out/fault-manager.log" && break; sleep 0.1; done
	PYTHONPATH=$here/python ORBITKV_LIB=$here/lib/liborbitkv.so.0 timeout 120 python3 "$here/gpu_kv_check.py" \
		--fault "$out/fault.sock" "$port" "$out/fault.ptx" >"$out/fault-client.log" 2>&1
	crc=$?
	wait $fpid
	mrc=$?
	if [ $crc = 0 ] && { [ $mrc = 134 ] || [ $mrc = 131 ]; } && grep -q "orbitkv-manager: fail-stop:" "$out/fault-manager.log"; then
		row manager-fault "pass (Manager exit $mrc; $(grep -m1 -o 'fail-stop: .*' "$out/fault-manager.log"))"
	else
		row manager-fault "fail (client exit $crc: $(tail -1 "$out/fault-client.log"); Manager exit $mrc, want 134 (SIGABRT) or 131 (SIGQUIT) with a fail-stop line; see fault-manager.log)"
	fi
fi

echo "summary in $summary"
exit $fail
