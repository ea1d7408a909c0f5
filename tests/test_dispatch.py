"""Which engine a batch runs on: cryptography until the Numba engine pays."""

import subprocess
import sys
import textwrap


def run(code: str, **env) -> str:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "AGEFAST_ENGINE"}
    environ.update(env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environ)
    assert done.returncode == 0, done.stderr
    return done.stdout


COMMON = """
    import sys, agefast
    from agefast import chunks
    identity = agefast.x25519.Identity.generate()
    data = bytes(range(256)) * (8 << 12)  # 8 MiB
    def round_trip(**kw):
        assert agefast.decrypt(agefast.encrypt(data, [identity.to_public()], **kw), [identity], **kw) == data
"""


def test_a_one_shot_job_stays_on_cryptography():
    out = run(COMMON + """
    round_trip()
    print("numba" in sys.modules)
    """)
    assert out == "False\n"


def test_several_threads_or_the_override_use_the_engine():
    assert run(COMMON + """
    round_trip(threads=2)
    print("agefast.kernels" in sys.modules)
    """) == "True\n"
    assert run(COMMON + """
    round_trip()
    print("agefast.kernels" in sys.modules)
    """, AGEFAST_ENGINE="numba") == "True\n"


def test_one_thread_stays_on_cryptography():
    out = run(COMMON + """
    chunks.ENGINE_AFTER = 1
    round_trip(threads=1)
    round_trip(threads=1)
    print("numba" in sys.modules, chunks._loader)
    """)
    assert out == "False None\n"


def test_the_engine_loads_in_the_background_after_enough_bytes():
    out = run(COMMON + """
    chunks.ENGINE_AFTER = 20 << 20
    round_trip()                      # 16 MiB moved: still cryptography
    print(chunks._loader is None)
    round_trip()                      # 32 MiB: the load starts
    chunks._loader.join()
    from agefast import kernels
    calls = []
    seal = kernels.seal_chunks
    kernels.seal_chunks = lambda *a: calls.append(1) or seal(*a)
    round_trip()                      # now on the engine, with the same results
    print(len(calls))
    """)
    assert out == "True\n1\n"


def test_one_thread_runs_on_the_engine_once_it_is_warm():
    out = run(COMMON + """
    from agefast import kernels
    kernels.warm_up()
    calls = set()
    seal, open_ = kernels.seal_chunks, kernels.open_chunks
    kernels.seal_chunks = lambda *a: calls.add("seal") or seal(*a)
    kernels.open_chunks = lambda *a: calls.add("open") or open_(*a)
    round_trip(threads=1)
    print(sorted(calls))
    """)
    assert out == "['open', 'seal']\n"
