//! OpenAPI schema generation for the CRDs, and the fixes that make it match OCM's CRDs.
//!
//! kube's derive produces a structural schema from the serde and schemars attributes, but a few
//! things cannot be said with attributes, so [`schema_for`] post-processes the generated JSON:
//!
//! - **Defaults.** schemars writes a `default` for every `#[serde(default)]` field (`""`, `0`,
//!   `false`, `[]`). OCM's CRDs default only a few fields, and an apiserver default changes stored
//!   objects, so every generated `default` is dropped and only the ones a field asks for with
//!   `#[schemars(extend("x-flotilla-default" = ...))]` are kept.
//! - **Nullability.** schemars marks every `Option` as `nullable`. OCM's CRDs do so only for a
//!   few fields (`taints[].timeAdded`); elsewhere the apiserver must prune a `null` (which Go
//!   clients send for nil slices) instead of storing it. Only fields marked with
//!   `#[schemars(extend("x-flotilla-nullable" = true))]` stay nullable.
//! - **Upstream markers.** k8s-openapi's schemas lack the validation and list/map markers that
//!   controller-gen copies from Kubernetes' Go types into OCM's CRDs: `metav1.Condition`
//!   (patterns, lengths, the status enum), `LabelSelector` (atomic), `ResourceRequirements`
//!   (`claims` keyed by name), `Quantity` and `IntOrString` (`anyOf` integer/string). They are
//!   recognised by shape and completed.
//!
//! [`is_structural`] is the check the tests run on every CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde_json::{Map, Value, json};

/// Extension key a field uses to ask for a CRD `default`.
pub const DEFAULT_MARKER: &str = "x-flotilla-default";
/// Extension key a field uses to stay `nullable` in the CRD.
pub const NULLABLE_MARKER: &str = "x-flotilla-nullable";
/// Extension key a field uses to drop the integer `format` (Go's `int` has none).
pub const NO_FORMAT_MARKER: &str = "x-flotilla-no-format";

/// Pattern that OCM's CRDs (via controller-gen) put on every `resource.Quantity`.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a raw embedded Kubernetes object (`runtime.RawExtension` with
/// `+kubebuilder:validation:EmbeddedResource` and `+kubebuilder:pruning:PreserveUnknownFields`).
pub fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of Go's `[]byte`: a base64 string.
pub fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "byte" })
}

/// Generates the OpenAPI v3 schema of a kind the way kube's derive does, then applies the OCM
/// fixes described in the module docs. Returns the schema as JSON.
pub fn schema_value_for<K: JsonSchema>() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    let mut value = generator.into_root_schema_for::<K>().to_value();
    normalize(&mut value);
    value
}

/// [`schema_value_for`] as the apiextensions type.
pub fn schema_for<K: JsonSchema>() -> Result<JSONSchemaProps, serde_json::Error> {
    serde_json::from_value(schema_value_for::<K>())
}

/// Applies the OCM fixes to one schema and, depth first, to all its subschemas.
fn normalize(value: &mut Value) {
    let Some(schema) = value.as_object_mut() else {
        return;
    };
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = schema.get_mut(key) {
            props.values_mut().for_each(normalize);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = schema.get_mut(key) {
            match sub {
                Value::Array(list) => list.iter_mut().for_each(normalize),
                other => normalize(other),
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(list)) = schema.get_mut(key) {
            list.iter_mut().for_each(normalize);
        }
    }

    schema.remove("default");
    schema.remove("nullable");
    schema.remove("const");
    schema.remove("title");
    schema.remove("$schema");
    if let Some(default) = schema.remove(DEFAULT_MARKER) {
        schema.insert("default".into(), default);
    }
    if schema.remove(NULLABLE_MARKER) == Some(Value::Bool(true)) {
        schema.insert("nullable".into(), Value::Bool(true));
    }
    if schema.remove(NO_FORMAT_MARKER) == Some(Value::Bool(true)) {
        schema.remove("format");
    }

    let is_quantity = schema
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| d.starts_with("Quantity is a fixed-point"));
    if is_quantity {
        schema.remove("description");
        schema.insert("pattern".into(), QUANTITY_PATTERN.into());
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        schema.remove("type");
        if schema
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| d.starts_with("IntOrString is a type"))
        {
            schema.remove("description");
        }
        schema.insert(
            "anyOf".into(),
            json!([{ "type": "integer" }, { "type": "string" }]),
        );
    }

    match property_names(schema).as_slice() {
        [
            "lastTransitionTime",
            "message",
            "observedGeneration",
            "reason",
            "status",
            "type",
        ] => complete_condition(schema),
        ["matchExpressions", "matchLabels"] => {
            schema.insert("x-kubernetes-map-type".into(), "atomic".into());
            if let Some(exprs) = property_mut(schema, "matchExpressions") {
                exprs.insert("x-kubernetes-list-type".into(), "atomic".into());
            }
        }
        ["key", "operator", "values"] => {
            if let Some(values) = property_mut(schema, "values") {
                values.insert("x-kubernetes-list-type".into(), "atomic".into());
            }
        }
        ["claims", "limits", "requests"] => {
            if let Some(claims) = property_mut(schema, "claims") {
                claims.insert("x-kubernetes-list-type".into(), "map".into());
                claims.insert("x-kubernetes-list-map-keys".into(), json!(["name"]));
            }
        }
        _ => {}
    }
}

/// Sorted property names of an object schema.
fn property_names(schema: &Map<String, Value>) -> Vec<&str> {
    let mut names: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    names.sort_unstable();
    names
}

fn property_mut<'a>(schema: &'a mut Map<String, Value>, name: &str) -> Option<&'a mut Map<String, Value>> {
    schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.get_mut(name))
        .and_then(Value::as_object_mut)
}

/// Adds the validation `metav1.Condition` carries in Kubernetes' Go types.
fn complete_condition(schema: &mut Map<String, Value>) {
    let extra = [
        ("message", json!({ "maxLength": 32768 })),
        ("observedGeneration", json!({ "minimum": 0 })),
        (
            "reason",
            json!({ "maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$" }),
        ),
        ("status", json!({ "enum": ["True", "False", "Unknown"] })),
        (
            "type",
            json!({
                "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            }),
        ),
    ];
    for (name, fields) in extra {
        if let (Some(prop), Value::Object(fields)) = (property_mut(schema, name), fields) {
            prop.extend(fields);
        }
    }
}

/// Problems that make a schema non-structural (or that a structural schema should not have),
/// each with its JSON path. Empty means the schema looks structural:
///
/// - every property, item and additional-properties schema has a `type`, or is
///   `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`;
/// - `anyOf`/`oneOf`/`allOf` appear only under `x-kubernetes-int-or-string`, and only with
///   `type: integer` / `type: string` branches;
/// - no `$ref`, `definitions` or `additionalProperties` next to `properties`.
pub fn structural_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check_structural(schema, "", &mut problems);
    problems
}

/// Whether [`structural_problems`] finds nothing.
pub fn is_structural(schema: &Value) -> bool {
    structural_problems(schema).is_empty()
}

fn check_structural(value: &Value, path: &str, problems: &mut Vec<String>) {
    let Some(schema) = value.as_object() else {
        problems.push(format!("{path}: not a schema object"));
        return;
    };
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !schema.contains_key("type") && !int_or_string && !preserve {
        problems.push(format!("{path}: no type"));
    }
    for key in ["$ref", "definitions", "$defs"] {
        if schema.contains_key(key) {
            problems.push(format!("{path}: has {key}"));
        }
    }
    if schema.contains_key("properties") && schema.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = schema.get(key) {
            let only_int_or_string = int_or_string
                && list.as_array().is_some_and(|branches| {
                    branches.iter().all(|b| {
                        b.as_object().is_some_and(|o| {
                            o.len() == 1
                                && matches!(o.get("type").and_then(Value::as_str), Some("integer" | "string"))
                        })
                    })
                });
            if !only_int_or_string {
                problems.push(format!("{path}: {key} outside int-or-string"));
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            check_structural(prop, &format!("{path}.{name}"), problems);
        }
    }
    if let Some(items) = schema.get("items") {
        check_structural(items, &format!("{path}[]"), problems);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        check_structural(extra, &format!("{path}.*"), problems);
    }
}
