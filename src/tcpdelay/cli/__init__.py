"""The ``tcpdelay`` command line.

One module per command group; each defines click commands and lists them in ``COMMANDS``.
:func:`main` turns every user error into one line on stderr and exit status 2 (see
:mod:`tcpdelay.errors`), never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from tcpdelay import __version__
from tcpdelay.timing import drop_timer_slack
from tcpdelay.cli.common import guard, usage_error_line
from tcpdelay.errors import EnvironmentNotSupported, TcpdelayError

# Each command and the module under tcpdelay.cli that defines it (listed in its COMMANDS).
# Modules are imported only when one of their commands runs, so `tcpdelay throughput` does
# not pay for scipy.sparse, pyarrow or the testbed.
COMMAND_MODULES = {
    "throughput": "throughput",
    "latency": "latency",
    "delay": "delay",
    "region": "delay",
    "playout": "delay",
    "advise": "advise",
    "evaluate": "evaluate",
    "testbed": "testbed",
    "cc": "cc",
    "metrics": "metrics",
    "send": "media",
    "recv": "media",
    "run": "experiments",
    "sweep": "experiments",
    "report": "report",
    "validate": "validate",
    "reproduce": "reproduce",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(name)
        if module is None:
            return None
        commands = importlib.import_module(f"tcpdelay.cli.{module}").COMMANDS
        for cmd in commands:
            if cmd.name == name:
                return guard(cmd)
        raise RuntimeError(f"tcpdelay.cli.{module} does not define the command {name!r}")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tcpdelay")
def cli() -> None:
    """Predict, measure and tune the delay of real-time media over TCP and UDP.

    Every command accepts --json for machine-readable output (keys documented in
    docs/cli.md). Bad input is reported on one line with exit status 2.
    """


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"tcpdelay: error: {message}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tcpdelay`` script."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name="tcpdelay")))
        sys.exit(0)
    drop_timer_slack()  # paced sends and timed runs end their sleeps on time (tcpdelay.timing)
    try:
        code = cli.main(args=args, prog_name="tcpdelay", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as err:  # a group called without a subcommand
        click.echo(err.ctx.get_help() if err.ctx else str(err))
        sys.exit(0)
    except click.UsageError as err:
        _fail(usage_error_line(err))
    except click.ClickException as err:
        _fail(" ".join(err.format_message().split()))
    except EnvironmentNotSupported as err:
        _fail(str(err))
    except TcpdelayError as err:
        _fail(str(err))
    except click.Abort:
        _fail("interrupted", 130)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    sys.exit(code if isinstance(code, int) else 0)
