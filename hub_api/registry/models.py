"""Request and response models of the schema registry API, in the Confluent shapes."""

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from registry.errors import InvalidSchema, InvalidVersion
from registry.limits import parse_subject
from registry.types import RegisteredSchema, SchemaReference, Version

_INT32_MAX = 2**31 - 1
_MAX_REFERENCE_NAME = 255


class ReferenceModel(BaseModel):
    """A named type taken from a version of another subject."""

    name: str = Field(description="The referenced type's full name, as used in the schema.")
    subject: str
    version: int

    def to_domain(self) -> SchemaReference:
        """The reference; 42202 for a version outside 1 to 2^31-1 (or -1, the latest)."""
        if not (1 <= self.version <= _INT32_MAX or self.version == -1):
            raise InvalidVersion(str(self.version))
        # Stored in a varchar(255) column; a longer or NUL-holding name is no Avro name anyway.
        if not self.name or len(self.name) > _MAX_REFERENCE_NAME or "\x00" in self.name:
            raise InvalidSchema(
                f"Invalid reference name '{self.name[:60]}': a reference names an Avro type "
                f"by its full name, of 1 to {_MAX_REFERENCE_NAME} characters."
            )
        return SchemaReference(
            name=self.name,
            subject=parse_subject(self.subject, what="Reference subject"),
            version=Version(self.version),
        )


class SchemaCreate(BaseModel):
    """A schema as clients send it: register, look up, or check compatibility."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    schema_: str = Field(alias="schema", description="The Avro schema as JSON text.")
    schema_type: str = Field(default="AVRO", alias="schemaType")
    references: list[ReferenceModel] = Field(default_factory=list)
    id: int | None = Field(
        default=None,
        description="Only in IMPORT mode, admin keys only: the id to keep (1 to 2^30-1).",
    )
    version: int | None = Field(
        default=None, description="Only in IMPORT mode, admin keys only: the version."
    )

    def domain_references(self) -> list[SchemaReference]:
        return [r.to_domain() for r in self.references]


class SchemaIdPublic(BaseModel):
    id: int


class SchemaPublic(BaseModel):
    """A schema by id. `schemaType` is left out for Avro, as Confluent does."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(serialization_alias="schema")
    references: list[ReferenceModel] | None = None


class SubjectVersionPublic(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    subject: str
    id: int
    version: int
    schema_: str = Field(serialization_alias="schema")
    references: list[ReferenceModel] | None = None

    @classmethod
    def of(cls, item: RegisteredSchema) -> "SubjectVersionPublic":
        return cls(
            subject=item.subject,
            id=item.schema_id,
            version=item.version,
            schema_=item.schema,
            references=_references(item.references),
        )


class SubjectVersionRef(BaseModel):
    subject: str
    version: int


class CompatibilityPut(BaseModel):
    """`{"compatibility": ...}`; newer clients send `{"compatibilityLevel": ...}`."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    compatibility: str = Field(
        validation_alias=AliasChoices("compatibility", "compatibilityLevel"),
        description="One of the seven compatibility levels.",
    )


class CompatibilityLevelPublic(BaseModel):
    compatibilityLevel: str  # Confluent's field name


class CompatibilityPublic(BaseModel):
    compatibility: str


class ModeBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: str = Field(description="READWRITE, READONLY or IMPORT.")


class CompatibilityCheckPublic(BaseModel):
    is_compatible: bool
    messages: list[str] | None = None


def _references(references: tuple[SchemaReference, ...]) -> list[ReferenceModel] | None:
    if not references:
        return None
    return [ReferenceModel(name=r.name, subject=r.subject, version=r.version) for r in references]
