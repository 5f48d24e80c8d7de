"""Errors of the warehouse builder."""

from hub_core.errors import ErrorCode, TerminalError


class InvalidWarehouseModel(TerminalError):
    """A model file that does not validate; the message names file, key path, value, choices."""

    code = ErrorCode.INVALID_WAREHOUSE_MODEL


class WarehouseSourceNotFound(TerminalError):
    """A model names a table or column that does not exist (yet)."""

    code = ErrorCode.WAREHOUSE_SOURCE_NOT_FOUND
