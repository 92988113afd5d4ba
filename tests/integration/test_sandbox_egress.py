"""The egress allow-list end to end, through the real sandbox: the daemon's egress proxy
(`legion.proxy.egress`) on its Unix socket with a real capability in the project's store, and
a command confined as a session is (bubblewrap, a network of its own, the bridge as its first
process with its egress port and forwards, the proxy variables a session gets) that fetches
from loopback servers by name through `HTTP_PROXY` and, over TLS with a test CA, through
`CONNECT`: with Python's urllib, curl, git (a dumb-HTTP repository), pip (a PEP 503 index)
and npm (a registry), none told more than the variables a session gets. What the list does not
allow is refused (403, counted, in `legion status --json`), a loopback literal is reached at
its own address inside, a forged capability is refused, a name that resolves to loopback is
refused unless its address is listed.

Needs bubblewrap (skipped where the machine forbids its namespaces, saying why) and openssl."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from legion.config import load_project
from legion.core import egress
from legion.proxy.egress import EgressProxy
from legion.proxy.egress_refusals import counting, refusal_counts
from legion.relay.capabilities import Capabilities
from legion.sandbox import Access, Confinement, bridge, empty_file, legion_install, wrap
from legion.store import open_store
from legion.store.actionlog import ActionLog
from tests.support.cli import LegionRunner
from tests.support.package_index import npm_registry, serve, simple_index
from tests.support.sandbox import require_sandbox


@pytest.fixture(autouse=True)
def _private_tmux(tmux_socket: Path) -> None:
    """`legion status` looks at tmux: a private server."""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _test_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for `localhost` and 127.0.0.1: (CA, cert, key)."""
    assert shutil.which("openssl") is not None, "openssl is not installed: apt install openssl"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=Legion test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    _openssl("req", *ec, "-keyout", "site.key", "-out", "site.csr", "-subj", "/CN=localhost",
             cwd=folder)  # fmt: skip
    (folder / "site.ext").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _openssl("x509", "-req", "-in", "site.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "site.pem", "-days", "2", "-extfile", "site.ext",
             cwd=folder)  # fmt: skip
    return folder / "ca.pem", folder / "site.pem", folder / "site.key"


def _site(folder: Path) -> Path:
    """A file, and a git repository served as dumb HTTP."""
    site = folder / "site"
    site.mkdir()
    (site / "hello.txt").write_text("hello from outside\n")
    source = folder / "source"
    source.mkdir()
    run = functools.partial(subprocess.run, check=True, capture_output=True)
    run(["git", "init", "-q", str(source)])
    (source / "README.md").write_text("cloned through the egress proxy\n")
    run(["git", "-C", str(source), "add", "README.md"])
    run(["git", "-C", str(source), "commit", "-qm", "first"])
    run(["git", "clone", "-q", "--bare", str(source), str(site / "repo.git")])
    run(["git", "-C", str(site / "repo.git"), "update-server-info"])
    return site


PROBE = "legion_egress_probe"
NPM_PROBE = "legion-egress-npm-probe"
NPM_SOURCE = b"module.exports = 'installed through the egress proxy';\n"


INSIDE = """
import json, os, socket, subprocess, sys, urllib.error, urllib.request

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as refused:
        return [refused.code, refused.read().decode()]
    except Exception as failed:
        return [None, repr(failed)]

def run(*argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return [done.returncode, done.stdout + done.stderr]

def forged():
    s = socket.socket(socket.AF_UNIX)
    s.connect(EGRESS_SOCKET)
    s.sendall(b"LEGION-EGRESS forged\\nCONNECT localhost:%d HTTP/1.1\\r\\n\\r\\n" % PLAIN)
    return s.recv(300).decode()

found = {
    "http": get(f"http://localhost:{PLAIN}/hello.txt"),
    "https": get(f"https://localhost:{TLS}/hello.txt"),
    "forwarded": get(f"http://127.0.0.1:{LITERAL}/hello.txt"),
    "by_name": get(f"http://localhost:{LITERAL}/hello.txt"),
    "unlisted": get("https://pypi.org/simple/"),
    "to_loopback": get(f"http://{HOST}:{PLAIN}/hello.txt") if HOST else None,
    "curl_http": run("curl", "-sS", f"http://localhost:{PLAIN}/hello.txt"),
    "curl_https": run("curl", "-sS", f"https://localhost:{TLS}/hello.txt"),
    "git_clone": run("git", "clone", "-q", f"http://localhost:{PLAIN}/repo.git", "/tmp/clone"),
    "git_ls_remote": run("git", "ls-remote", f"https://localhost:{TLS}/repo.git"),
    "forged": forged(),
    "pip": run(sys.executable, "-m", "pip", "install", "-q", "--no-cache-dir", "--target",
               "/tmp/installed", "--index-url", f"https://localhost:{TLS}/simple/",
               "legion-egress-probe"),
    "npm": run("npm", "install", "--prefix", "/tmp/npm-project", "--registry",
               f"https://localhost:{TLS}/", "--no-audit", "--no-fund", "--cache", "/tmp/npm-cache",
               "legion-egress-npm-probe"),
}
npm_installed = "/tmp/npm-project/node_modules/legion-egress-npm-probe/index.js"
if os.path.exists(npm_installed):
    found["npm_installed"] = open(npm_installed).read()
if os.path.exists("/tmp/installed/legion_egress_probe/__init__.py"):
    found["installed"] = open("/tmp/installed/legion_egress_probe/__init__.py").read()
if os.path.exists("/tmp/clone/README.md"):
    found["cloned"] = open("/tmp/clone/README.md").read()
print(json.dumps(found))
"""


def _loopback_hostname() -> str:
    """This machine's name when it resolves to a loopback address (as /etc/hosts often says),
    else "" (that check is then left out)."""
    name = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except OSError:
        return ""
    loopback = addresses and all(egress.special(address) for address in addresses)
    return name if loopback and egress.normal_host(name) not in (None, "localhost") else ""


def test_a_confined_session_reaches_what_sandbox_egress_allows_and_nothing_else(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    sandbox = require_sandbox()
    ca, cert, key = _test_ca(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    site = _site(tmp_path)
    simple_index(site, PROBE, b"REACHED = 'installed through the egress proxy'\n")
    host = _loopback_hostname()
    servers = contextlib.ExitStack()
    plain, tls_port, literal = (
        servers.enter_context(serve(site, way)) for way in (None, tls, None)
    )
    npm_registry(site, f"https://localhost:{tls_port}", NPM_PROBE, NPM_SOURCE)
    entries = [f"localhost:{plain}", f"localhost:{tls_port}", f"127.0.0.1:{literal}"]
    entries += [f"{host}:{plain}"] if host else []
    rules = egress.parse(entries)

    loaded = load_project(project)
    store = open_store(loaded)
    token = Capabilities(store).mint("LEG-1", mode="implement", session_id="s-egress")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    socket_path = run / "egress.sock"
    server = EgressProxy(
        socket_path, rules, lambda: open_store(loaded), refused=counting(lambda: open_store(loaded))
    )
    server.start()
    try:
        # A wrong capability from outside: refused before anything is read further.
        with socket.socket(socket.AF_UNIX) as outside:
            outside.connect(str(socket_path))
            outside.sendall(b"LEGION-EGRESS nothing\nCONNECT localhost:%d HTTP/1.1\r\n\r\n" % plain)
            assert outside.recv(200).startswith(b"HTTP/1.1 407")

        forwards = egress.forwarded(rules)
        model_port = 41999  # nothing answers there: the model is not what this test asks
        egress_port = egress.egress_port({model_port, *(port for _, port, _ in forwards)})
        code = INSIDE.replace("EGRESS_SOCKET", repr(str(socket_path)))
        code = code.replace("PLAIN", str(plain)).replace("TLS", str(tls_port))
        code = code.replace("LITERAL", str(literal)).replace("HOST", repr(host))
        argv = bridge.command(
            [sys.executable, "-c", textwrap.dedent(code)],
            model_port,
            str(run / "model.sock"),
            egress=bridge.Egress(egress_port, str(socket_path), forwards),
        )
        state = tmp_path / "state"
        state.mkdir()
        confinement = Confinement(
            home=tmp_path / "home",
            empty=empty_file(state),
            access=Access(readable=(*legion_install(), run)),
        )
        shown_ca = shutil.copy(ca, run / "ca.pem")  # where the sandbox shows it
        trusted = dict.fromkeys(
            ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO",
             "PIP_CERT", "NODE_EXTRA_CA_CERTS"),
            str(shown_ca),
        )  # fmt: skip
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path / "home"),
            "LEGION_CAPABILITY": token,
            "GIT_CONFIG_NOSYSTEM": "1",
            "PIP_CONFIG_FILE": os.devnull,  # no machine's index or links: only the proxy's
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            **egress.variables(egress_port),
            **trusted,
        }
        done = subprocess.run(
            wrap(sandbox, confinement, argv),
            env=env,
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        found = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.stop()
        servers.close()

    hello = "hello from outside\n"
    assert found["http"] == [200, hello]
    assert found["https"] == [200, hello]
    assert found["forwarded"] == [200, hello]  # 127.0.0.1:LITERAL, at its own address inside
    assert found["curl_http"] == [0, hello]
    assert found["curl_https"] == [0, hello]
    assert found["git_clone"][0] == 0, found["git_clone"]
    assert found["cloned"] == "cloned through the egress proxy\n"
    assert found["git_ls_remote"][0] == 0 and "refs/heads/" in found["git_ls_remote"][1]
    # `localhost` is not `127.0.0.1:LITERAL`: a name, refused by the list.
    status, line = found["by_name"]
    assert status == 403 and "sandbox_egress" in line and f"localhost:{literal}" in line
    assert line.count("\n") == 1 and f'"localhost:{literal}" to sandbox_egress' in line
    status, line = found["unlisted"]  # urllib shows a refused CONNECT's status, not its body
    assert status is None and "Tunnel connection failed: 403" in line
    if host:  # a name allowed by the list that resolves to a loopback address
        status, line = found["to_loopback"]
        assert status == 403 and "resolves to 127." in line
    assert found["forged"].startswith("HTTP/1.1 407")
    assert found["pip"][0] == 0, found["pip"]  # a PEP 503 index over TLS, through CONNECT
    assert found["installed"] == "REACHED = 'installed through the egress proxy'\n"
    # npm's registry over TLS, through CONNECT, with only the variables a session gets.
    assert found["npm"][0] == 0, found["npm"]
    assert found["npm_installed"] == NPM_SOURCE.decode()

    counted = {(c.host, c.port): c for c in refusal_counts(store)}
    assert counted[("localhost", literal)].count == 1
    assert counted[("pypi.org", 443)].session_id == "s-egress"
    assert counted[("pypi.org", 443)].issue == "LEG-1"
    shown = legion("status", "--json")
    assert shown.returncode == 0, shown.stderr
    refused = json.loads(shown.stdout)["egress"]["refused"]
    expected = {"session_id": "s-egress", "issue": "LEG-1", "host": "pypi.org", "port": 443}
    assert {**expected, "count": 1} in [{k: r[k] for k in (*expected, "count")} for r in refused]
    # Once a (session, host) in the action log: each host here was refused on one port.
    details = [e.detail for e in ActionLog(store).tail(20) if e.action == "egress_refused"]
    assert sum("s-egress: pypi.org:443 is not allowed" in d for d in details) == 1
    assert len(details) == len(counted)
    store.close()
