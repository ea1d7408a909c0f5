"""CI runs the quick profile end to end, as a user would."""

import json
import subprocess
import sys


def test_quick_run_passes(tmp_path):
    report = tmp_path / "torture.json"
    p = subprocess.run([sys.executable, "-m", "torture", "--quick", "--report", str(report)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    data = json.loads(report.read_text())
    assert {"strata", "oracles", "cases", "failures", "axes"} <= data.keys()
    assert {"age-cli", "pyrage", "reference"} <= set(data["oracles"])
    assert all(data["oracle_files"].get(o, 0) > 100 for o in ("age-cli", "pyrage", "reference")), data["oracle_files"]
    assert data["strata"] == ["Micro", "SubSIMD", "Nominal", "Edge", "Jumbo", "MultiStream", "Boundary"]
    assert data["cases"] >= 1000
    assert data["failures"] == 0
    assert {r["axis"] for r in data["axes"]} == {"roundtrip", "adversarial-io", "keys", "tamper"}
