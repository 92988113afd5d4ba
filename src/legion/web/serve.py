"""`legion web`: the web view served until Ctrl-C.

It listens on 127.0.0.1 unless told otherwise; on any other address it needs TLS (a
certificate and its key) or the word that a TLS proxy stands in front (`--behind-tls-proxy`),
since its cookie and its login link must not cross a network in clear. It prints a link that
logs in once (as Jupyter does); teammates get named tokens (`legion web token`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from legion.core.web_access import is_loopback, served_hosts
from legion.errors import InputError

DEFAULT_PORT = 8787


@dataclass(frozen=True, slots=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    read_only: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_tls_proxy: bool = False
    allow_hosts: tuple[str, ...] = ()

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def check_options(options: ServeOptions) -> None:
    """Refuse, in a line, what would serve the view unsafely or cannot work."""
    if (options.tls_cert is None) != (options.tls_key is None):
        raise InputError("--tls-cert and --tls-key go together: the certificate and its key")
    for path in (options.tls_cert, options.tls_key):
        if path is not None and not path.is_file():
            raise InputError(f"{path}: no such file")
    if not is_loopback(options.host) and not (options.tls or options.behind_tls_proxy):
        raise InputError(
            f"refusing to serve on {options.host} without TLS: give --tls-cert and --tls-key, "
            "or --behind-tls-proxy when a TLS reverse proxy stands in front"
        )
    if not 0 <= options.port <= 65535:
        raise InputError(f"--port {options.port}: a port is 0 to 65535 (0: any free one)")


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if port and exc.errno == 98:
            raise InputError(
                f"port {port} is in use: --port P, or --port 0 for any free one"
            ) from None
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


MAX_CONNECTIONS = 400


def public_address(options: ServeOptions, port: int) -> str:
    """Where people reach it, as its link says: the first `--allow-host` (as given: behind a
    proxy, the proxy's name and port), else this address, or this machine's name when it
    listens on every address."""
    if options.allow_hosts:
        return options.allow_hosts[0]
    every = options.host in ("0.0.0.0", "::")  # every address: this machine by its name
    shown = socket.gethostname() if every else options.host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    return f"{shown}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server that, as it stops, first ends the open pages' live streams: they would
    otherwise hold it for its graceful timeout, then be cancelled with an error."""

    def __init__(self, config: uvicorn.Config, end_streams: Callable[[], None]) -> None:
        super().__init__(config)
        self.end_streams = end_streams

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.end_streams()
        await super().shutdown(sockets)


class WebServer:
    """The web view bound and ready: its login link, served in the foreground (`serve`) or,
    beside the demo's swarm, in a thread (`running`)."""

    def __init__(self, options: ServeOptions, env: Mapping[str, str], cwd: Path) -> None:
        from legion.sessions.identity import default_author
        from legion.web.app import WebSettings, create_app
        from legion.web.gate import Gate
        from legion.web.reads import MachineReads
        from legion.web.tokens import TokenStore, tokens_path

        check_options(options)
        self.options = options
        self.socket = bind(options.host, options.port)
        port = self.socket.getsockname()[1]
        https = options.tls or options.behind_tls_proxy
        address = public_address(options, port)
        settings = WebSettings(
            served_hosts(options.host, port, (*options.allow_hosts, address)),
            "https" if https else "http",
            secure_cookie=https,
        )
        self.gate = Gate(
            TokenStore(tokens_path(env)), default_author(), read_only=options.read_only
        )
        app = create_app(MachineReads(env, cwd), self.gate, settings)
        self.link = f"{settings.scheme}://{address}/login?token={self.gate.link_token}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,  # a login link's token must not reach a log
            ssl_certfile=str(options.tls_cert) if options.tls_cert else None,
            ssl_keyfile=str(options.tls_key) if options.tls_key else None,
            timeout_graceful_shutdown=2,
            server_header=False,
            # The client's address is the connection's: X-Forwarded-For is believed only from
            # the proxy the person said stands in front, on this machine.
            proxy_headers=options.behind_tls_proxy,
            forwarded_allow_ips="127.0.0.1" if options.behind_tls_proxy else None,
            # Connections at once (each open page holds one): past it, 503 at once.
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=5,
        )
        self.server = _Server(config, app.state.live.end_streams)

    def announce(self, say: Callable[[str], None]) -> None:
        say(f"Legion's web view: {self.link}")
        say(
            "The link logs in once"
            + (", read-only" if self.options.read_only else "")
            + "; teammates: `legion web token --name NAME`."
        )

    def serve(self) -> None:
        """Until Ctrl-C (or SIGTERM)."""
        self.server.run(sockets=[self.socket])

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Served in a thread for the block."""
        thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="legion-web"
        )
        thread.start()
        try:
            yield
        finally:
            self.server.should_exit = True
            thread.join(timeout=10)
            self.socket.close()


def serve(
    options: ServeOptions, env: Mapping[str, str], cwd: Path, say: Callable[[str], None]
) -> None:
    server = WebServer(options, env, cwd)
    server.announce(say)
    say("Ctrl-C stops it.")
    server.serve()


def served_beside(
    stack: contextlib.ExitStack[bool | None], say: Callable[[str], None], cwd: Path
) -> None:
    """The web view of the project in `cwd` (the demo's), on any free port of 127.0.0.1, in a
    thread until `stack` closes; its link said."""
    server = WebServer(ServeOptions(port=0), dict(os.environ), cwd)
    stack.enter_context(server.running())
    server.announce(say)
