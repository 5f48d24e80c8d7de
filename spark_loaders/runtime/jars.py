"""Finding the jars `make jars` puts in place, with one error for a jar that is not there."""

from pathlib import Path

from hub_core.errors import LocalServiceFailed
from spark_loaders.errors import LoaderError


def required_jar(
    folder: Path,
    pattern: str,
    *,
    what: str,
    setting: str,
    error: type[LocalServiceFailed] = LoaderError,
) -> Path:
    """The last of `folder`'s jars named like `pattern` (the newest version, by name).

    Without one, `error` (50010): what is missing, where it was looked for, and
    the two ways out, `make jars` or `setting`, the folder to look in instead.
    """
    found = sorted(folder.glob(pattern))
    if not found:
        raise error(
            f"No {what} ({pattern}) in {folder}. Run `make jars`, or set {setting} to the "
            "folder holding it."
        )
    return found[-1]
