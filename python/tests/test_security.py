"""psync.Client's TLS, mutual TLS and job-token options against a coordinator serving TLS with
certificates made here (openssl), and a job tokens file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import psync
from conftest import Coordinator
from psync import ChunkPlan, PsyncError, StatusCode

PLAN = [ChunkPlan(chunk=0, optimizers=["dense"], groups={"dp": [0]})]


def make_certificates(d: Path) -> None:
    """A CA; a server certificate for localhost / 127.0.0.1 and a client certificate it signed;
    a second CA's client certificate the server does not trust."""
    script = """
set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=psync-test-ca
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 1 -subj /CN=other
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile san.ext
openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=rank
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1
openssl req -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.csr -subj /CN=rogue
openssl x509 -req -in rogue.csr -CA other.pem -CAkey other.key -CAcreateserial -out rogue.pem -days 1
"""
    subprocess.run(["bash", "-c", script], cwd=d, check=True, timeout=120,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def tls_coordinator(tmp_path):
    make_certificates(tmp_path)
    (tmp_path / "tokens").write_text("secure s3cret\n")
    c = Coordinator(tmp_path, [f"--tls_cert={tmp_path / 'server.pem'}",
                               f"--tls_key={tmp_path / 'server.key'}",
                               f"--tls_client_ca={tmp_path / 'ca.pem'}",
                               f"--job_tokens_file={tmp_path / 'tokens'}"])
    c.start()
    try:
        yield c
    finally:
        c.kill()


def connect(c, tls, token="s3cret", job="secure"):
    return psync.Client(c.target, job=job, rank=0, world_size=1, chunks=PLAN, tls=tls,
                        token=token, call_timeout=2)


def test_mutual_tls_and_the_job_token(tls_coordinator):
    d = tls_coordinator.workdir
    pem = lambda name: (d / name).read_text()  # noqa: E731
    good = psync.TlsOptions(root_certs=pem("ca.pem"), cert_chain=pem("client.pem"),
                            private_key=pem("client.key"), target_name_override="localhost")
    with connect(tls_coordinator, good) as client:
        client.staged(0, 0, "dense")
        assert client.wait_directive(0, 0, timeout=10).chunk == 0
        status = psync.get_job_status(tls_coordinator.target, "secure", tls=good)
        assert status["jobId"] == "secure"

    cases = [
        (dict(tls=None), StatusCode.UNAVAILABLE),  # plain text to a TLS server
        (dict(tls=psync.TlsOptions(root_certs=pem("ca.pem"),
                                   target_name_override="localhost")),
         StatusCode.UNAVAILABLE),  # no client certificate
        (dict(tls=psync.TlsOptions(root_certs=pem("ca.pem"), cert_chain=pem("rogue.pem"),
                                   private_key=pem("rogue.key"),
                                   target_name_override="localhost")),
         StatusCode.UNAVAILABLE),  # a certificate of another CA
        (dict(tls=good, token="wrong"), StatusCode.UNAUTHENTICATED),
        (dict(tls=good, job="unlisted"), StatusCode.PERMISSION_DENIED),
    ]
    for kwargs, code in cases:
        with pytest.raises(PsyncError) as e:
            connect(tls_coordinator, **kwargs)
        assert e.value.code == code, (kwargs.keys(), e.value)
