"""State files a kill cannot ruin: atomic rewrites, a torn metrics tail, a torn checkpoint state.

The kill test runs a real child process (no Ray) that rewrites ``metrics.jsonl`` in a loop and
is SIGKILLed at a random moment; the earlier records must all survive.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nemo_genrm.files.atomic import read_jsonl, write_atomic, write_json_atomic
from nemo_genrm.grpo.checkpoint import STATE_FILE, Checkpointer
from nemo_genrm.grpo.config import CheckpointingConfig, LoggerConfig
from nemo_genrm.grpo.logger import MetricsLogger


def _steps(path: Path) -> list[int]:
    return [record["step"] for record in read_jsonl(path).records]


def test_torn_metrics_tail_does_not_crash_the_resume(tmp_path):
    cfg = LoggerConfig(log_dir=str(tmp_path), tensorboard_enabled=False)
    path = tmp_path / "metrics.jsonl"
    # Steps 1 and 2 complete, step 3 torn mid-line by a kill.
    path.write_text('{"step": 1, "r": 0.1}\n{"step": 2, "r": 0.2}\n{"step": 3, "r": 0.')
    again = MetricsLogger(cfg)
    again.begin(2)  # resumed from the checkpoint of step 2
    again.log({"r": 0.3}, 3)
    again.close()
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]


def test_clean_resume_appends_without_rewriting(tmp_path):
    cfg = LoggerConfig(log_dir=str(tmp_path), tensorboard_enabled=False)
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "r": 0.1}\n{"step": 2, "r": 0.2}\n')
    inode = path.stat().st_ino
    again = MetricsLogger(cfg)
    again.begin(2)  # nothing past step 2: the file is appended to, not replaced
    again.log({"r": 0.3}, 3)
    again.close()
    assert path.stat().st_ino == inode and _steps(path) == [1, 2, 3]


def test_unreadable_middle_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1}\nnot json\n[1, 2]\n{"step": 2}\n')
    found = read_jsonl(path)
    assert [r["step"] for r in found.records] == [1, 2]
    assert found.dropped == 2 and not found.clean


_REWRITER = textwrap.dedent(
    """
    import sys
    from nemo_genrm.grpo.config import LoggerConfig
    from nemo_genrm.grpo.logger import MetricsLogger

    log = MetricsLogger(LoggerConfig(log_dir=sys.argv[1], tensorboard_enabled=False))
    log.begin(0)
    for step in range(1, 3001):
        log.log({"train/reward_mean": step / 3000, "pad": 1.0}, step)
    print("ready", flush=True)
    while True:  # resume from step 2999 again and again: each begin rewrites the file
        log.begin(2999)
        log.log({"train/reward_mean": 1.0}, 3000)
    """
)


def test_kill_during_metrics_rewrite_keeps_earlier_records(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _REWRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.7)  # many rewrites in flight by now
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    steps = _steps(tmp_path / "metrics.jsonl")
    assert steps[:2999] == list(range(1, 3000))  # nothing before the checkpoint was lost
    assert steps[2999:] in ([], [3000])


def test_atomic_write_leaves_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    write_json_atomic(path, {"a": 1})

    def killed(fd: int) -> None:
        raise KeyboardInterrupt  # as a signal arriving between writing and renaming

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, '{"a": 2, "b": "half')
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]  # no temporary left


class _Policy:
    """Writes a small file where the policy worker would write its weights."""

    def save_checkpoint(self, path: str) -> None:
        (Path(path) / "weights.bin").write_bytes(b"w")


def test_torn_trainer_state_falls_back_to_the_previous_checkpoint(tmp_path):
    ckpt = Checkpointer(CheckpointingConfig(checkpoint_dir=str(tmp_path), keep_last=None))
    for step in (2, 4):
        ckpt.save(step, _Policy(), {"sampler": {}})
    assert ckpt.steps() == [2, 4]
    (tmp_path / "step_4" / STATE_FILE).write_text('{"step": 4, "sam')  # torn by a kill
    assert ckpt.steps() == [2] and ckpt.latest() == tmp_path / "step_2"


def test_saving_a_step_again_replaces_it_whole(tmp_path):
    ckpt = Checkpointer(CheckpointingConfig(checkpoint_dir=str(tmp_path), keep_last=None))
    ckpt.save(3, _Policy(), {"sampler": {"pos": 1}})
    ckpt.save(3, _Policy(), {"sampler": {"pos": 2}})
    state = json.loads((tmp_path / "step_3" / STATE_FILE).read_text())
    assert state["sampler"] == {"pos": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_3"]  # no tmp_ or old_ left


def test_run_config_is_written_without_url_credentials(tmp_path):
    cfg = LoggerConfig(log_dir=str(tmp_path), tensorboard_enabled=False)
    url = "http://genrm:sk-planted-key-0042@127.0.0.1:8000/v1"
    MetricsLogger(cfg, run_config={"env": {"genrm": {"judge": {"http": {"base_url": url}}}}}).close()
    text = (tmp_path / "config.json").read_text()
    assert "sk-planted-key-0042" not in text
    assert json.loads(text)["env"]["genrm"]["judge"]["http"]["base_url"] == "http://***@127.0.0.1:8000/v1"
