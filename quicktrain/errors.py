"""User-facing errors: the CLI prints them as one line and exits with their status."""


class QuicktrainError(Exception):
    """A problem with the user's input (config, data, paths), not a bug in quicktrain."""

    exit_status = 2


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
