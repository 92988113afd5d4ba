"""A package index on loopback for the tests of confined builds: a static site served over
HTTP (or TLS), and a one-module wheel laid out as a PEP 503 simple index in it."""

from __future__ import annotations

import base64
import functools
import hashlib
import ssl
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from tests.fakes.serving import threaded_server


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(site: Path, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve `site` on a free port of 127.0.0.1 (with `tls`, over TLS) while the block lasts:
    its port."""
    with threaded_server(functools.partial(_Quiet, directory=site), tls) as server:
        yield int(server.server_address[1])


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def simple_index(site: Path, module: str, source: bytes, version: str = "1.0") -> str:
    """A wheel of one module (`module`, its `__init__.py` being `source`), served as a PEP
    503 simple index under `site/simple/`; the project's name (the module's, with dashes)."""
    name = module.replace("_", "-")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [_record_line(path, data) for path, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = site / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    project = site / "simple" / name
    project.mkdir(parents=True)
    (project / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../{wheel.name}#sha256={digest}">'
        f"{wheel.name}</a></body></html>\n"
    )
    return name


def npm_registry(
    site: Path, base_url: str, name: str, source: bytes, version: str = "1.0.0"
) -> None:
    """A package of one file (`index.js`, being `source`), laid out in `site` as npm's registry
    serves it: its document at `/NAME`, its tarball under `/tarballs/`, at `base_url`."""
    import io
    import json
    import tarfile

    files = {
        "package/package.json": json.dumps({"name": name, "version": version}).encode(),
        "package/index.js": source,
    }
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as archive:
        for path, data in files.items():
            entry = tarfile.TarInfo(path)
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    tarball = packed.getvalue()
    (site / "tarballs").mkdir(exist_ok=True)
    (site / "tarballs" / f"{name}-{version}.tgz").write_bytes(tarball)
    integrity = base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    document = {
        "name": name,
        "dist-tags": {"latest": version},
        "versions": {
            version: {
                "name": name,
                "version": version,
                "dist": {
                    "tarball": f"{base_url.rstrip('/')}/tarballs/{name}-{version}.tgz",
                    "shasum": hashlib.sha1(tarball).hexdigest(),
                    "integrity": f"sha512-{integrity}",
                },
            }
        },
    }
    (site / name).write_text(json.dumps(document))
