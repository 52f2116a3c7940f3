"""``celestial``, the command line: the program (program.py), its exit statuses (exits.py), arguments
(parser.py), commands (commands.py, transfer.py, config.py, feedback.py, reflect.py), output
(output.py), and what only the CLI uses (locomo_eval.py, dump_file.py, progress.py)."""

from celestial_client.cli.program import EXIT, exit_status, main

__all__ = ["EXIT", "exit_status", "main"]
