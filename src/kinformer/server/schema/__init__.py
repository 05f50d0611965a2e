"""The API's definitions: the built-in catalogue and schemas, structural schemas, OpenAPI, conversion."""
