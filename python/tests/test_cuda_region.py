"""CUDA KV buffers registered by handle (orbitkv.cuda, register_cuda_buffer):
the region's encoding (struct layout, offset in the base allocation, the
handle and UUID bytes, the refusals naming their field) without a GPU, and
registration through liborbitkv into a real Manager: refused naming
--copy-backend on the host backend, mapped on --copy-backend cuda over the
CUDA driver double (build/native/libokv_cuda_double.so, loaded through
ORBITKV_LIBCUDA), a bad UUID refused naming regions[0].device_uuid. What
needs a device is in scripts/gpu-check.sh (not run: no GPU here)."""

from __future__ import annotations

import ctypes
import os
import signal
import unittest

from tests import support

orbitkv = support.import_orbitkv()
from orbitkv import cuda  # noqa: E402
from orbitkv.errors import Rejected  # noqa: E402

DOUBLE = os.path.join(support.REPO, "build", "native", "libokv_cuda_double.so")


_DUMPABLE = support.DumpableEngine()


def setUpModule():
    _DUMPABLE.start()


def tearDownModule():
    _DUMPABLE.stop()


class FixedDriver:
    """Stands in for the driver's answers about one allocation (a GPU this
    machine lacks): base and size, its IPC handle, the device UUID."""

    def __init__(self, base: int, size: int):
        self.base, self.size = base, size
        self.handle = bytes(range(64))
        self.uuid = bytes(range(0xA0, 0xB0))

    def address_range(self, ptr: int) -> tuple[int, int]:
        return self.base, self.size

    def ipc_handle(self, base: int) -> bytes:
        assert base == self.base
        return self.handle

    def device_uuid(self, ordinal: int) -> bytes:
        return self.uuid


class EncodingTest(unittest.TestCase):
    def test_the_structure_matches_client_h(self):
        # buffer.c's static asserts pin the C side to the same numbers.
        self.assertEqual(ctypes.sizeof(cuda.CudaRegion), 136)
        self.assertEqual(cuda.CudaRegion.ipc_handle.offset, 24)
        self.assertEqual(cuda.CudaRegion.vmm_fd.offset, 88)
        self.assertEqual(cuda.CudaRegion.page_count.offset, 128)

    def test_a_region_carries_its_offset_in_the_allocation_the_handle_and_the_uuid(self):
        d = FixedDriver(base=0x7F0000000000, size=1 << 24)
        r = cuda.cuda_region(d.base + 4096, 2 * 8 * 65536, 0, 2, 65536, 8, driver=d)
        self.assertEqual((r.handle_kind, r.offset, r.bytes, r.layers, r.page_bytes, r.page_count, r.vmm_fd),
                         (cuda.HANDLE_IPC, 4096, 2 * 8 * 65536, 2, 65536, 8, -1))
        self.assertEqual(bytes(r.ipc_handle), d.handle)
        self.assertEqual(bytes(r.device_uuid), d.uuid)

    def test_refusals_name_the_field(self):
        d = FixedDriver(base=0x10000, size=1 << 20)
        cases = [
            ("a region past its allocation", (d.base + (1 << 20) - 64, 4096, 0, 1, 4096, 1), "exceeds the allocation"),
            ("a layout larger than the bytes", (d.base, 4096, 0, 2, 4096, 1), "bytes = 4096: smaller"),
            ("zero layers", (d.base, 4096, 0, 0, 4096, 1), "layers = 0"),
        ]
        for name, args, want in cases:
            with self.subTest(name):
                with self.assertRaises(ValueError) as cm:
                    cuda.cuda_region(*args, driver=d)
                self.assertIn(want, str(cm.exception))

    def test_a_host_tensor_is_refused(self):
        try:
            import torch
        except ImportError as e:
            self.skipTest(f"torch not importable: {e}")
        with self.assertRaises(ValueError) as cm:
            cuda.tensor_region(torch.zeros(16), 1, 64, 1)
        self.assertIn("want a CUDA tensor", str(cm.exception))


class RegistrationTest(unittest.TestCase):
    def region(self, kind: int, uuid: bytes, fd: int = -1) -> cuda.CudaRegion:
        r = cuda.CudaRegion()
        r.handle_kind, r.layers, r.page_bytes, r.page_count = kind, 2, 4096, 4
        r.bytes, r.offset, r.vmm_fd, r.alloc_bytes = 2 * 4 * 4096, 4096, fd, 1 << 20
        ctypes.memmove(r.device_uuid, uuid, 16)
        return r

    def test_a_host_backend_manager_refuses_cuda_memory_naming_the_flag(self):
        m = support.Manager()
        self.addCleanup(m.stop)
        c = orbitkv.CacheManagerClient(socket_path=m.socket)
        self.addCleanup(c.close)
        with self.assertRaises(Rejected) as cm:
            c.register_cuda_buffer(self.region(cuda.HANDLE_IPC, bytes(16)))
        self.assertIn("regions[0].handle_kind", str(cm.exception))
        self.assertIn("--copy-backend cuda", str(cm.exception))

    def test_a_cuda_manager_maps_a_vmm_fd_and_refuses_an_unknown_device(self):
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        old = os.environ.get("ORBITKV_LIBCUDA")
        os.environ["ORBITKV_LIBCUDA"] = DOUBLE
        try:
            m = support.Manager("--copy-backend", "cuda")
        finally:
            if old is None:
                del os.environ["ORBITKV_LIBCUDA"]
            else:
                os.environ["ORBITKV_LIBCUDA"] = old
        # The double's device 0 UUID (cuda_double.c cuDeviceGetUuid).
        uuid = bytes((0xD0 + i) & 0xFF for i in range(16))
        self.addCleanup(m.stop)
        fd = os.memfd_create("vmm")
        self.addCleanup(os.close, fd)
        os.ftruncate(fd, 1 << 20)
        c = orbitkv.CacheManagerClient(socket_path=m.socket)
        self.addCleanup(c.close)
        self.assertEqual(c.register_cuda_buffer(self.region(cuda.HANDLE_VMM_FD, uuid, fd)), 0)
        with self.assertRaises(Rejected) as cm:
            c.register_cuda_buffer(self.region(cuda.HANDLE_VMM_FD, bytes(16), fd))
        self.assertIn("regions[0].device_uuid", str(cm.exception))
        self.assertIn("no CUDA device with UUID", str(cm.exception))

    def test_a_cuda_manager_publishes_from_and_restores_into_a_vmm_buffer(self):
        # The whole path with the CUDA backend: the buffer is a VMM fd (a
        # memfd, for the double) mapped by the Manager; publish copies out of
        # that mapping and restore into it as device jobs on the session's
        # streams; the bytes are checked in this process's view of the fd.
        import mmap
        from tests.test_client import engine_hashes, identity
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        os.environ["ORBITKV_LIBCUDA"] = DOUBLE
        try:
            m = support.Manager("--copy-backend", "cuda")
        finally:
            del os.environ["ORBITKV_LIBCUDA"]
        self.addCleanup(m.stop)
        uuid = bytes((0xD0 + i) & 0xFF for i in range(16))
        fd = os.memfd_create("vmm")
        self.addCleanup(os.close, fd)
        os.ftruncate(fd, 1 << 20)
        view = mmap.mmap(fd, 1 << 20)
        self.addCleanup(view.close)
        c = orbitkv.CacheManagerClient(socket_path=m.socket)
        self.addCleanup(c.close)
        r = self.region(cuda.HANDLE_VMM_FD, uuid, fd)  # 2 layers x 4 pages of 4096 at offset 4096
        r.page_count, r.bytes = 8, 2 * 8 * 4096
        bid = c.register_cuda_buffer(r)

        def page(layer: int, p: int) -> slice:
            start = r.offset + (layer * r.page_count + p) * r.page_bytes
            return slice(start, start + r.page_bytes)

        for layer in range(2):
            for p in range(4):
                view[page(layer, p)] = os.urandom(4096)
        ns = identity(self.id()).namespace()
        hs = engine_hashes(self.id(), 4)
        self.assertEqual(c.publish(ns, bid, hs, [0, 1, 2, 3]), (4, 0))
        answer = c.lookup(ns, orbitkv.BlockHashes(hs))
        self.assertEqual(answer.hit_count, 4)
        op = c.start_restore(answer.lease_id, bid, [(i, 4 + i) for i in range(4)])
        c.wait_restore(op, timeout_s=30)
        for layer in range(2):
            for i in range(4):
                self.assertEqual(view[page(layer, 4 + i)], view[page(layer, i)], f"layer {layer} block {i}")
        c.release(answer.lease_id)

    def vmm_buffer(self, m) -> tuple:
        """A client of Manager m with a 1 MiB memfd registered as a CUDA VMM
        buffer on the double's device 0: (client, buffer id)."""
        fd = os.memfd_create("vmm")
        self.addCleanup(os.close, fd)
        os.ftruncate(fd, 1 << 20)
        c = orbitkv.CacheManagerClient(socket_path=m.socket)
        self.addCleanup(c.close)
        return c, c.register_cuda_buffer(self.region(cuda.HANDLE_VMM_FD, bytes((0xD0 + i) & 0xFF for i in range(16)), fd))

    def test_a_sticky_device_error_during_publish_ends_the_manager_in_fail_stop(self):
        # The double's first cuMemcpyAsync fails with a sticky
        # CUDA_ERROR_ILLEGAL_ADDRESS (700): the stream cannot be synchronized,
        # so completion cannot be established and the Manager must abort
        # saying why (docs/design.md rule 9) rather than answer the publish.
        import time
        from tests.test_client import engine_hashes, identity
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        os.environ["ORBITKV_LIBCUDA"] = DOUBLE
        os.environ["ORBITKV_CUDA_DOUBLE_FAULT"] = "cuMemcpyAsync:1:700:s"
        try:
            m = support.Manager("--copy-backend", "cuda")
        finally:
            del os.environ["ORBITKV_LIBCUDA"], os.environ["ORBITKV_CUDA_DOUBLE_FAULT"]
        self.addCleanup(m.stop)
        c, bid = self.vmm_buffer(m)
        with support.hang_guard(120):
            with self.assertRaises(orbitkv.errors.OrbitKVError):
                c.publish(identity(self.id()).namespace(), bid, engine_hashes(self.id(), 1), [0])
            deadline = time.monotonic() + 60
            while m.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        # abort() in a C thread of a Go program: Go's runtime reports the
        # SIGABRT (its dump says so) and, with the Manager's crash
        # traceback, dies by a signal: SIGABRT, or the SIGQUIT it relays
        # among its threads (never status 2, the configuration error's).
        log = "".join(m.log)
        self.assertIn(m.proc.returncode, (-signal.SIGABRT, -signal.SIGQUIT), f"the Manager did not die by SIGABRT: {log[-2000:]}")
        self.assertIn("SIGABRT", log)
        self.assertIn("orbitkv-manager: fail-stop: copy job", log)
        self.assertIn("cuMemcpyAsync failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)", log)

    def test_a_device_fault_armed_through_the_failpoint_ends_the_manager_in_fail_stop(self):
        # The failpoint build's device-side fault (what scripts/gpu-check.sh
        # does on a GPU with fault.cu): the next device job launches a
        # faulting kernel ahead of its copies, the device's error turns
        # sticky, the job's event query fails, and the Manager must abort
        # saying why (docs/design.md rule 9) rather than answer the publish. The
        # double takes any readable file as the module; fault.cu stands in.
        import time
        from tests.test_client import engine_hashes, identity
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        os.environ["ORBITKV_LIBCUDA"] = DOUBLE
        try:
            m = support.Manager("--copy-backend", "cuda", binary=support.FP_MANAGER_BIN)
        finally:
            del os.environ["ORBITKV_LIBCUDA"]
        self.addCleanup(m.stop)
        module = os.path.join(support.REPO, "native", "tests", "gpu", "fault.cu")
        with self.assertRaises(RuntimeError) as cm:
            m.arm_device_fault("/nonexistent/fault.ptx")
        self.assertIn("HTTP 400", str(cm.exception))
        c, bid = self.vmm_buffer(m)
        ns, hs = identity(self.id()).namespace(), engine_hashes(self.id(), 2)
        self.assertEqual(c.publish(ns, bid, hs[:1], [0]), (1, 0), "a publish before the fault is armed")
        m.arm_device_fault(module)
        with support.hang_guard(120):
            with self.assertRaises(orbitkv.errors.OrbitKVError):
                c.publish(ns, bid, hs[1:], [1])
            deadline = time.monotonic() + 60
            while m.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        log = "".join(m.log)
        # The fail-stop comes from the backend's completion thread, a C
        # thread Go did not start: abort() kills the process by SIGABRT
        # before Go's runtime can report it (from a Go thread in cgo, as in
        # the test above, Go reports it and exits with status 2).
        self.assertIn(m.proc.returncode, (-signal.SIGABRT, -signal.SIGQUIT), f"the Manager did not die by SIGABRT: {log[-2000:]}")
        self.assertIn("launched the device fault kernel ahead of its copies", log)
        self.assertIn("orbitkv-manager: fail-stop: copy job", log)
        self.assertIn("cuEventQuery failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)", log)

    def test_the_device_fault_endpoint_needs_a_cuda_backend(self):
        m = support.Manager(binary=support.FP_MANAGER_BIN)
        self.addCleanup(m.stop)
        with self.assertRaises(RuntimeError) as cm:
            m.arm_device_fault(os.path.join(support.REPO, "native", "tests", "gpu", "fault.cu"))
        self.assertIn("HTTP 409", str(cm.exception))

    def test_auto_picks_cuda_with_a_device_and_host_without_a_driver_saying_why(self):
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        for lib, want in ((DOUBLE, 'backend=cuda why="cuda: 1 device(s)"'),
                          ("/nonexistent/libcuda.so.1", 'backend=host why="host: no usable CUDA driver (dlopen /nonexistent/libcuda.so.1')):
            with self.subTest(lib):
                os.environ["ORBITKV_LIBCUDA"] = lib
                try:
                    m = support.Manager("--copy-backend", "auto")
                finally:
                    del os.environ["ORBITKV_LIBCUDA"]
                try:
                    self.assertIn(want, "".join(m.log))
                finally:
                    m.stop()


if __name__ == "__main__":
    unittest.main()
