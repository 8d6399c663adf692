"""User-facing errors: the CLI prints them as one line and exits with their status."""


class QuicktrainError(Exception):
    """A problem with the user's input (config, data, paths), not a bug in quicktrain.

    Raised in a DataLoader worker, torch re-raises it in the training process with the worker's
    whole traceback as its message; the message is then the original one line again, and
    ``detail`` keeps the traceback.

    Example:
        >>> err = DataError("Caught DataError in DataLoader worker process 0.\\nOriginal Traceback (most "
        ...                 "recent call last):\\n  File ...\\nquicktrain.errors.DataError: cannot decode 'a.jpg'\\n")
        >>> str(err), err.detail.startswith("Caught")
        ("cannot decode 'a.jpg'", True)
    """

    exit_status = 2

    def __init__(self, *args: object) -> None:
        self.detail = ""
        if len(args) == 1 and isinstance(args[0], str) and _WORKER_TRACEBACK in args[0]:
            self.detail, args = args[0], (_original_message(args[0]),)
        super().__init__(*args)


class ConfigError(QuicktrainError):
    """A config key, value or combination that cannot be used."""


class DataError(QuicktrainError):
    """A dataset that is missing, malformed or unknown."""


class TrainingError(QuicktrainError):
    """Training cannot go on (e.g. the loss became NaN); the record keeps what was done."""

    exit_status = 1


class EnvironmentFault(QuicktrainError):
    """The machine, not the input, failed (a full disk): the record says so; exit status 1."""

    exit_status = 1


class RunStopped(Exception):
    """Raised by an epoch hook to end a run early on purpose; the record's status says ``status``."""

    def __init__(self, reason: str, status: str = "stopped") -> None:
        super().__init__(reason)
        self.status = status


_WORKER_TRACEBACK = "\nOriginal Traceback (most recent call last):\n"  # torch's ExceptionWrapper.reraise


def _original_message(text: str) -> str:
    """The last line of a worker's traceback without its ``module.Class: `` prefix."""
    last = [line for line in text.splitlines() if line.strip()][-1]
    name, sep, message = last.partition(": ")
    return message if sep and name.replace(".", "").replace("_", "").isalnum() else last
