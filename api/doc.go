// Package api carries Sluice's OpenAPI contract, ../openapi.yaml, embedded
// by oapi-codegen (`make generate`), so tests and tools load exactly the
// document that ships. Load it with GetSwagger.
package api
