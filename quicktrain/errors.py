"""User-facing errors: the CLI prints them as one line and exits with status 2."""


class QuicktrainError(Exception):
    """A problem with the user's input (config, data, paths), not a bug in quicktrain."""


class ConfigError(QuicktrainError):
    """A config key, value or combination that cannot be used."""


class DataError(QuicktrainError):
    """A dataset that is missing, malformed or unknown."""
