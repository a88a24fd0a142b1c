"""``filtex-broker-users``: add entries to a users file (hashing the password) and check a file.

``add`` appends a ``[users.NAME]`` table as text, so comments and the order
of the existing file are kept; the result is loaded again before it is
written, so a file that the broker would refuse is never produced.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from filtex_broker.security.users import ANONYMOUS, UsersError, hash_password, load_users

__all__ = ["main"]

EXAMPLE: Final = """\
examples:
  # alice may send to orders.<anything> and consume orders.<one segment>; prompts twice
  filtex-broker-users add users.toml alice --send 'orders.#' --receive 'orders.*'

  # from a script: the password on stdin (first line)
  printf '%s\\n' "$PW" | filtex-broker-users add users.toml app --password-stdin --send '#'

  # a client certificate user (SASL EXTERNAL), and what ANONYMOUS may do
  filtex-broker-users add users.toml billing --subject 'CN=billing,O=Example' --receive 'inv.#'
  filtex-broker-users add users.toml anonymous --browse 'public.#'

  # an operator of the management console (filtex-broker --console)
  filtex-broker-users add users.toml ops --admin

  filtex-broker-users check users.toml      # validate; list users and their grants
  filtex-broker --listen-tls 0.0.0.0:5671 --tls-cert s.pem --tls-key s.key --users users.toml

patterns: segments split at '.' or '/'; '*' = exactly one segment, '#' = zero or more;
'receive' implies 'browse'.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filtex-broker-users",
        description="Manage the filtex-broker users file (scrypt password hashes, client "
        "certificate subjects, per-user send/receive/browse address patterns).",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a user (the file is created if missing)")
    add.add_argument("file", type=Path)
    add.add_argument("name")
    how = add.add_mutually_exclusive_group()
    how.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    how.add_argument("--no-password", action="store_true",
                     help="no PLAIN login (the default with --subject, and for 'anonymous')")
    add.add_argument("--subject", metavar="DN", help="TLS client certificate subject (EXTERNAL)")
    for action in ("send", "receive", "browse"):
        add.add_argument(f"--{action}", action="append", default=[], metavar="PATTERN",
                         help=f"addresses this user may {action} (repeatable)")
    add.add_argument("--admin", action="store_true",
                     help="may use the management console (filtex-broker --console)")
    check = commands.add_parser("check", help="validate a users file and list its users")
    check.add_argument("file", type=Path)
    return parser


def _password(args: argparse.Namespace) -> str | None:
    if args.no_password or args.name == ANONYMOUS or (args.subject and not args.password_stdin):
        return None
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        try:
            password = getpass.getpass(f"password for {args.name}: ")
            if getpass.getpass("again: ") != password:
                raise UsersError("the passwords differ")
        except EOFError:
            raise UsersError("no password typed (use --password-stdin in scripts)") from None
    if not password:
        raise UsersError("empty password")
    return password


def _entry(args: argparse.Namespace, password: str | None) -> str:
    lines = [f"\n[users.{json.dumps(args.name)}]"]
    if password is not None:
        lines.append(f"password = {json.dumps(hash_password(password))}")
    if args.subject:
        lines.append(f"subject = {json.dumps(args.subject)}")
    for action in ("send", "receive", "browse"):
        if getattr(args, action):
            lines.append(f"{action} = {json.dumps(getattr(args, action))}")
    if args.admin:
        lines.append("admin = true")
    return "\n".join(lines) + "\n"


def _add(args: argparse.Namespace) -> int:
    path: Path = args.file
    old = path.read_text() if path.exists() else ""
    if old and load_users(path).get(args.name) is not None:
        raise UsersError(f"{path}: user {args.name!r} exists already (edit or remove its table)")
    new = old + _entry(args, _password(args))
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(new)
    os.chmod(tmp, 0o600)
    try:
        load_users(tmp)
    except UsersError as exc:
        tmp.unlink()
        raise UsersError(str(exc).replace(str(tmp), str(path))) from None
    tmp.replace(path)
    print(f"{path}: added user {args.name!r} (a running broker applies it on SIGHUP)")
    return 0


def _check(args: argparse.Namespace) -> int:
    users = load_users(args.file)
    for user in users.by_name.values():
        how = ", ".join(what for what, present in (("password", user.password_hash),
                                                   (f"subject {user.subject}", user.subject))
                        if present) or "no credentials"
        print(f"{user.name}: {how}; {user.grants.describe()}{'; admin' if user.admin else ''}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """0 on success, 1 with a message on stderr for anything unusable."""
    args = _parser().parse_args(argv)
    try:
        return _add(args) if args.command == "add" else _check(args)
    except (UsersError, OSError) as exc:
        print(f"filtex-broker-users: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
