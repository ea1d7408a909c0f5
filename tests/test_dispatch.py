"""Which engine a job runs on (agefast.payload.engine.choose): cryptography until the compiled kernels pay, then every core."""

import os
import subprocess
import sys
import textwrap

import pytest

import agefast.errors


@pytest.fixture(scope="module", autouse=True)
def warm_cache():
    # The processes below inherit this environment, and with it a cache that
    # holds the kernels for this machine (filled here if it is cold).
    from agefast import kernels

    kernels.warm_up()


def run(code: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "AGEFAST_ENGINE"}
    environ.update(env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environ, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


COMMON = """
    import sys, agefast
    from agefast.payload import engine
    identity = agefast.x25519.Identity.generate()
    data = bytes(range(256)) * (8 << 12)  # 8 MiB
    def round_trip(plain=data, **kw):
        assert agefast.decrypt(agefast.encrypt(plain, [identity.to_public()], **kw), [identity], **kw) == plain
    def engine_calls():
        from agefast import kernels
        calls = []
        for name in ("seal_chunks", "open_chunks"):
            function = getattr(kernels, name)
            # the engine passes threads as the sixth argument
            setattr(kernels, name, lambda *a, f=function: calls.append(a[5]) or f(*a))
        return calls
"""


def test_jobs_move_to_the_kernels_once_the_process_has_moved_enough_on_cryptography():
    # No job of 8 MiB reaches ENGINE_AFTER alone; together they do, and the jobs after that run on the kernels.
    out = run(COMMON + """
    engine.ENGINE_AFTER = 20 << 20
    round_trip()                      # 16 MiB moved
    print("agefast.kernels" in sys.modules)
    round_trip()                      # the encryption crosses 20 MiB: the cached kernels are loaded
    from agefast import kernels
    calls = engine_calls()
    round_trip()
    print(kernels.is_warm(), len(calls) > 0, "numba" in sys.modules)
    """)
    assert out == "False\nTrue True False\n"


def test_a_child_forked_while_the_process_counts_can_count():
    out = run(COMMON + """
    import os
    engine._tally._lock.acquire()     # as if another thread were counting when the process forks
    pid = os.fork()
    if pid == 0:
        import signal
        signal.alarm(60)              # a child stuck on the lock dies of SIGALRM
        round_trip()
        os._exit(0)
    engine._tally._lock.release()
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """)
    assert out == "0\n"


def test_small_jobs_stay_on_cryptography_however_many():
    # A job known to be under KERNEL_MIN_BATCH could never run on the kernels: it does not count.
    out = run(COMMON + """
    engine.ENGINE_AFTER = 1 << 20
    small = data[:100_000]           # under KERNEL_MIN_BATCH, sealed too
    for _ in range(40):
        round_trip(small)
    print("agefast.kernels" in sys.modules)
    """)
    assert out == "False\n"


def test_past_the_threshold_the_cached_kernels_run_without_numba_beside_the_populating_thread():
    # A new result is faulted in by a thread of its own: the kernels get the other cores (payload/steps.py)
    # where they catch up with it. Here they always do (each step of the faulting in is slow): on a loaded
    # machine the thread could fault in all 8 MiB before the kernels asked for it, and they took every core.
    out = run(COMMON + """
    import time
    from agefast.io import buffers
    fault_in = buffers._Populator._fault_in
    buffers._Populator._fault_in = lambda self, at: time.sleep(0.2) or fault_in(self, at)
    engine.ENGINE_AFTER = 8 << 20
    round_trip()                      # each job reaches the threshold
    calls = engine_calls()
    round_trip()
    from agefast.io import cpus
    from agefast import kernels
    print(calls == [max(1, cpus.count() - 1)] * 2, kernels.is_warm(), "numba" in sys.modules)
    """)
    assert out == "True True False\n"


def test_several_threads_or_the_override_use_the_engine():
    assert run(COMMON + """
    round_trip(threads=2)
    print("agefast.kernels" in sys.modules, "numba" in sys.modules)
    """) == "True False\n"
    assert run(COMMON + """
    engine.ENGINE_AFTER = 1 << 40
    round_trip()
    print("agefast.kernels" in sys.modules)
    """, AGEFAST_ENGINE="numba") == "True\n"


def test_the_setting_is_read_at_a_processs_first_job(engine_setting, monkeypatch):
    from agefast.payload.engine import choose

    engine_setting("numba")
    assert choose(1024, None).kernels is not None
    # Kept for the process: neither a new value nor an invalid one is seen.
    monkeypatch.setenv("AGEFAST_ENGINE", "openssl")
    assert choose(1024, None).kernels is not None
    engine_setting("openssl")
    with pytest.raises(agefast.errors.EngineError, match="AGEFAST_ENGINE must be"):
        choose(1024, None)
    with pytest.raises(agefast.errors.EngineError):     # an invalid value is not kept: every job raises
        choose(1024, None)


def test_jobs_stay_on_cryptography_where_numba_runs_no_compiled_code():
    # NUMBA_DISABLE_JIT=1, set by someone debugging their own Numba code, had sent jobs to the kernels' own
    # Python (0.3 MB/s: a 40 MB file took minutes); it is for tests of the kernels, which call them directly.
    out = run(COMMON + """
    from agefast import kernels
    calls = engine_calls()
    round_trip(threads=2)
    round_trip(threads=None)
    print(calls, kernels.is_warm())
    """, NUMBA_DISABLE_JIT="1")
    assert out == "[] False\n"


def test_a_small_job_loads_no_kernels_however_many_threads():
    # None of its batches could be split over them (KERNEL_SPLIT_BATCH): loading them would cost it milliseconds.
    out = run(COMMON + """
    # up to the largest plaintext under KERNEL_SPLIT_BATCH: a decryption had counted its ciphertext, tags too
    for size in (100_000, 512 << 10, engine.KERNEL_SPLIT_BATCH - 1):
        small = data[:size]
        round_trip(small, threads=2)
    print("agefast.kernels" in sys.modules)
    """)
    assert out == "False\n"


def test_once_loaded_the_kernels_take_a_batch_of_a_few_chunks_on_the_calling_thread():
    # From KERNEL_MIN_BATCH to KERNEL_SPLIT_BATCH one kernel call on the caller's thread (it releases the
    # GIL); a smaller job stays on cryptography.
    out = run(COMMON + """
    from agefast import kernels
    kernels.warm_up()
    calls = engine_calls()
    for size in (engine.KERNEL_MIN_BATCH - 1, engine.KERNEL_MIN_BATCH, engine.KERNEL_SPLIT_BATCH - 1):
        part = data[:size]
        round_trip(part)
        print(calls)
        calls.clear()
    """)
    assert out == "[]\n[1, 1]\n[1, 1]\n"


def test_jobs_of_a_few_chunks_count_towards_the_threshold():
    out = run(COMMON + """
    engine.ENGINE_AFTER = 4 << 20
    part = data[:engine.KERNEL_MIN_BATCH]
    for _ in range(10):               # 5 MiB moved
        round_trip(part)
    from agefast import kernels
    print(kernels.is_warm())
    """)
    assert out == "True\n"


def test_one_thread_stays_on_cryptography_below_its_threshold():
    out = run(COMMON + """
    engine.ENGINE_AFTER = 1
    engine.ONE_CORE_AFTER = 2 * len(data)      # the encryption and the decryption (its size is the sealed file)
    round_trip(threads=1)
    round_trip(threads=1)
    print("agefast.kernels" in sys.modules)       # nothing loaded, nothing counted, nothing compiling
    """)
    assert out == "False\n"


def test_one_thread_loads_the_cached_kernels_for_a_job_large_enough():
    out = run(COMMON + """
    engine.ONE_CORE_AFTER = len(data)
    sealed = agefast.encrypt(data, [identity.to_public()], threads=1)
    from agefast import kernels
    print(kernels.is_warm(), "numba" in sys.modules)
    calls = engine_calls()
    assert agefast.decrypt(sealed, [identity], threads=1) == data
    print(calls)
    """)
    assert out == "True False\n[1]\n"


def test_one_thread_never_compiles(tmp_path):
    out = run(COMMON + """
    engine.ONE_CORE_AFTER = len(data)
    engine.COMPILE_AFTER = 1
    round_trip(threads=1)             # the cache is cold: cryptography, and no compile on another core
    from agefast.kernels import _loader
    print(_loader._compiling is None, _loader.is_warm())
    """, NUMBA_CACHE_DIR=str(tmp_path))
    assert out == "True False\n"


def test_a_cold_cache_compiles_in_the_background_for_a_large_job(tmp_path):
    out = run(COMMON + """
    engine.ENGINE_AFTER = 8 << 20
    engine.COMPILE_AFTER = 20 << 20
    round_trip()                      # 16 MiB moved, the cache is cold: cryptography, nothing compiled
    from agefast.kernels import _loader
    print(_loader._compiling is None, "numba" in sys.modules)
    big = data * 3                    # a job of 24 MiB: the compile starts
    round_trip(big)
    _loader._compiling.join()
    calls = engine_calls()
    round_trip()                      # now on the engine, with the same results
    print(len(calls))
    """, NUMBA_CACHE_DIR=str(tmp_path))
    assert out == "True False\n2\n"


def test_a_cold_cache_is_compiled_once_the_process_has_moved_enough(tmp_path):
    out = run(COMMON + """
    engine.COMPILE_AFTER = 20 << 20
    started = []
    engine._compile_in_background = lambda: started.append(1)   # the rule, not the compile (the test above)
    round_trip()                      # 16 MiB in jobs of 8: nothing to compile yet
    print(len(started))
    round_trip()                      # past 20 MiB: the compile is started (again for each batch after: a no-op)
    print(len(started) > 0, "agefast.kernels" in sys.modules)
    """, NUMBA_CACHE_DIR=str(tmp_path))
    assert out == "0\nTrue True\n"


def test_one_thread_runs_on_the_engine_once_it_is_warm():
    out = run(COMMON + """
    from agefast import kernels
    kernels.warm_up()
    calls = engine_calls()
    round_trip(threads=1)
    print(calls)
    """)
    assert out == "[1, 1]\n"


def test_kernels_that_cannot_load_leave_the_job_to_cryptography():
    out = run(COMMON + """
    import warnings
    from agefast import kernels
    from agefast.kernels import _loader
    def broken():
        raise OSError("cannot map the library")
    _loader._load = broken
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        round_trip(threads=2)
        round_trip(threads=2)       # not tried again
    print(kernels.is_warm(), sum("staying on cryptography" in str(w.message) for w in seen))
    """)
    assert out == "False 1\n"


def test_a_file_known_to_be_large_starts_on_the_kernels(tmp_path):
    # Its size says it reaches ENGINE_AFTER: no batch of it goes to cryptography.
    out = run(COMMON + f"""
    from agefast import kernels
    calls = engine_calls()
    from cryptography.hazmat.primitives.ciphers import aead     # the engine imports it per batch
    sealed_with = []
    real = aead.ChaCha20Poly1305
    aead.ChaCha20Poly1305 = lambda key: sealed_with.append(1) or real(key)
    engine.ENGINE_AFTER = 8 << 20
    open({str(tmp_path / "plain")!r}, "wb").write(data + data)       # 16 MiB
    agefast.encrypt_file({str(tmp_path / "plain")!r}, {str(tmp_path / "sealed")!r}, [identity.to_public()])
    print(len(calls) > 0, len(sealed_with))
    """)
    assert out == "True 1\n"   # cryptography sealed only the first chunk (a batch too small for the kernels)


def test_a_stream_moves_to_the_kernels_once_it_has_moved_enough():
    # Its size is not known: it counts its own bytes, and the batches after the threshold run on the kernels.
    out = run(COMMON + """
    import io
    from agefast import kernels
    engine.ENGINE_AFTER = 8 << 20
    calls = engine_calls()
    with agefast.encryptor(io.BytesIO(), [identity.to_public()]) as w:
        for _ in range(4):
            w.write(data)             # 32 MiB, in batches of 1 MiB
    print(0 < len(calls) < 32, kernels.is_warm())
    """)
    assert out == "True True\n"
