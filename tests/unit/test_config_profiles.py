"""--profile test, --test-controls safety and --create-topics parsing."""

from __future__ import annotations

import pytest

from kbroker.broker.config import load_config


def test_the_test_profile_sets_its_values_and_explicit_settings_win() -> None:
    cfg = load_config({"profile": "test"}, None, {})
    assert (cfg.group_initial_rebalance_delay_ms, cfg.group_min_session_timeout_ms, cfg.flush) == (0, 1000, "never")
    cfg = load_config({"profile": "test", "flush": "always"}, None, {"KBROKER_GROUP_MIN_SESSION_TIMEOUT_MS": "500"})
    assert (cfg.flush, cfg.group_min_session_timeout_ms) == ("always", 500)
    assert load_config({}, None, {}).group_initial_rebalance_delay_ms == 3000
    with pytest.raises(ValueError, match="--profile"):
        load_config({"profile": "prod"}, None, {})


def test_test_controls_stay_on_loopback_unless_the_operator_says_otherwise() -> None:
    assert load_config({"test_controls": True}, None, {}).metrics_listen == "127.0.0.1:9644"
    with pytest.raises(ValueError, match="loopback"):
        load_config({"test_controls": True, "metrics_listen": "0.0.0.0:9644"}, None, {})
    cfg = load_config({"test_controls": True, "metrics_listen": "0.0.0.0:9644", "test_controls_remote": True}, None, {})
    assert cfg.metrics_listen == "0.0.0.0:9644"
    assert load_config({}, None, {}).metrics_listen == ""  # metrics are off unless asked


def test_a_broker_without_metrics_never_imports_prometheus_client(tmp_path) -> None:
    import subprocess
    import sys

    from kbroker.tests.integration.broker_process import free_port

    # Each Broker binds its listener and locks its data directory when built: two of each.
    first, second = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    code = (
        "import sys\n"
        "from kbroker.broker.config import load_config\n"
        "from kbroker.broker.app import Broker\n"
        f"Broker(load_config({{'data_dir': {str(tmp_path / 'a')!r}, 'listen': {first!r}}}, None, {{}}))\n"
        "assert 'prometheus_client' not in sys.modules, 'imported'\n"
        f"Broker(load_config({{'data_dir': {str(tmp_path / 'b')!r}, 'listen': {second!r}, "
        "'metrics_listen': '127.0.0.1:0'}, None, {}))\n"
        "assert 'prometheus_client' not in sys.modules, 'imported before the first scrape'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
