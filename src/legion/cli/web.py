"""`legion web`: the swarm in a browser (docs/web.md); `legion web token | tokens | revoke`:
the named tokens teammates log in with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from legion.cli import common

web_app = typer.Typer(
    help="The swarm in a browser: boards, the inbox, live (docs/web.md).",
    epilog=common.example(
        "legion web", "legion web --read-only --port 9000", "legion web token --name ana"
    ),
)


@web_app.callback(invoke_without_command=True)
def web(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The address to listen on; another than 127.0.0.1 needs TLS or "
            "--behind-tls-proxy.",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="The port; 0: any free one.")] = 8787,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Nobody writes through it: every person a viewer.")
    ] = False,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="TLS certificate (PEM).")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="Its key (PEM).")] = None,
    behind_tls_proxy: Annotated[
        bool,
        typer.Option(
            "--behind-tls-proxy",
            help="A TLS reverse proxy stands in front: serve plain HTTP on --host to it.",
        ),
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A host name people reach it by (as NAME or NAME:PORT); repeatable.",
        ),
    ] = None,
) -> None:
    """Serve the web view until Ctrl-C: each project's board and the questions waiting for
    a person, updated live. It prints a link that logs you in once."""
    if ctx.invoked_subcommand is not None:
        return
    from legion.web.serve import ServeOptions, serve

    options = ServeOptions(
        host=host,
        port=port,
        read_only=read_only,
        tls_cert=tls_cert,
        tls_key=tls_key,
        behind_tls_proxy=behind_tls_proxy,
        allow_hosts=tuple(allow_host or ()),
    )
    serve(options, os.environ, common.repo_path(ctx), typer.echo)


@web_app.command("token", epilog=common.example("legion web token --name ana --read-only"))
def token(
    name: Annotated[
        str, typer.Option("--name", help="Whom it is for: their deeds are credited to it.")
    ],
    read_only: Annotated[
        bool, typer.Option("--read-only", help="A viewer's: reads, never writes.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Mint a named token for a teammate: they paste it at the web view's /login. It is shown
    once and kept hashed; `legion web revoke NAME` ends it and every session it opened."""
    from legion.core.web_access import Role
    from legion.sessions.identity import default_author
    from legion.web.tokens import TokenStore, tokens_path

    role = Role.VIEWER if read_only else Role.OPERATOR
    minted = TokenStore(tokens_path(os.environ)).mint(name, role, owner=default_author())
    if as_json:
        common.print_json({"name": name, "role": role.value, "token": minted})
        return
    typer.echo(f"{name} ({role.value}): {minted}")
    typer.echo("They paste it at the web view's /login (shown once; kept only hashed).")


@web_app.command("tokens", epilog=common.example("legion web tokens --json"))
def tokens(as_json: Annotated[bool, common.JsonOption] = False) -> None:
    """The named tokens: whose, their role, when made (never the tokens themselves)."""
    from legion.web.tokens import TokenStore, tokens_path

    found = TokenStore(tokens_path(os.environ)).all()
    if as_json:
        common.print_json([named.to_json() for named in found])
        return
    if not found:
        typer.echo("No named tokens: `legion web token --name NAME` makes one.")
        return
    for named in found:
        common.echo(f"{named.name}  {named.role.value}  {named.created_at}")


@web_app.command("revoke", epilog=common.example("legion web revoke ana"))
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name (`legion web tokens`).")],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Revoke a named token: its holder's open pages stop at their next request."""
    from legion.web.tokens import TokenStore, tokens_path

    TokenStore(tokens_path(os.environ)).revoke(name)
    if as_json:
        common.print_json({"revoked": name})
        return
    typer.echo(f"{name}: revoked")
