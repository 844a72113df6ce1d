"""The one error type of the system model: a configuration or input it cannot simulate."""


class ConfigError(ValueError):
    """A bad model, system, workload or hardware description; the message names what is wrong."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
