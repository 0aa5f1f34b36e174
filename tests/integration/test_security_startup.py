"""Security settings a broker cannot start with: one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kbroker.tests.integration.broker_process import free_port


def serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "serve", "--data-dir", str(tmp_path / "data"), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args,needles", [
    (["--ssl-keystore-location", "{garbage}"], ["--ssl-keystore-location", "cannot load"]),
    (["--ssl-keystore-location", "{missing}"], ["--ssl-keystore-location", "is not a file"]),
    ([], ["--ssl-keystore-location", "SSL"]),
    (["--ssl-client-auth", "sometimes", "SASL"], ["--ssl-client-auth", "sometimes"]),
    (["--sasl-enabled-mechanisms", "GSSAPI", "SASL"], ["--sasl-enabled-mechanisms", "GSSAPI"]),
    (["--ssl-principal-mapping-rules", "RULE:oops", "SASL"], ["--ssl-principal-mapping-rules"]),
    # OAUTHBEARER needs a key set to check tokens against, the audience and the issuer (Kafka 4.4)
    (["--sasl-enabled-mechanisms", "OAUTHBEARER", "SASL"], ["--sasl-oauthbearer-jwks-endpoint-url", "key set"]),
    (["--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-endpoint-url", "http://idp/jwks",
      "SASL"], ["--sasl-oauthbearer-jwks-endpoint-url", "https://"]),
    (["--sasl-enabled-mechanisms", "OAUTHBEARER", "--sasl-oauthbearer-jwks-endpoint-url", "https://idp/jwks",
      "--sasl-oauthbearer-expected-issuer", "i", "SASL"], ["--sasl-oauthbearer-expected-audience"]),
    (["--dev-unsecured-oauthbearer", "SASL"], ["--dev-unsecured-oauthbearer", "no effect"]),
])
def test_one_line_and_nothing_written(tmp_path, args, needles):
    protocol = "SSL"
    if args and args[-1] == "SASL":
        args, protocol = args[:-1], "SASL_PLAINTEXT"
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    args = [a.format(garbage=garbage, missing=tmp_path / "missing.pem") for a in args]
    out = serve(tmp_path, "--listeners", f"{protocol}://127.0.0.1:{free_port()}", *args)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), lines
    assert not (tmp_path / "data").exists()
