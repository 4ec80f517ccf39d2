//! Kubernetes' CEL semver and quantity libraries, which OCM's environment includes and the
//! `cel` crate does not: `semver()`, `isSemver()`, `quantity()`, `isQuantity()`, and on their
//! values `isGreaterThan()`, `isLessThan()`, `compareTo()`; `major()`, `minor()`, `patch()` on
//! versions; `asInteger()`, `asApproximateFloat()`, `isInteger()`, `sign()` on quantities.
//! Versions are parsed by the `semver` crate, quantities by Flotilla's quantity parser (the
//! one the registration agent reports capacity with).

use std::{cmp::Ordering, sync::Arc};

use cel::{Context, ExecutionError, Value, extractors::This, objects::Opaque};

use crate::registration::agent::resources;

/// A parsed version, as an opaque CEL value.
#[derive(Debug, PartialEq, Eq)]
struct Semver(::semver::Version);

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// A quantity in nano-units, as an opaque CEL value.
#[derive(Debug, PartialEq, Eq)]
struct Quantity(i128);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

const NANO: i128 = 1_000_000_000;

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn semver(value: &Value) -> Option<&::semver::Version> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Semver>().map(|s| &s.0),
        _ => None,
    }
}

fn quantity(value: &Value) -> Option<i128> {
    match value {
        Value::Opaque(o) => o.downcast_ref::<Quantity>().map(|q| q.0),
        _ => None,
    }
}

fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if let (Some(a), Some(b)) = (semver(a), semver(b)) {
        return Ok(a.cmp(b));
    }
    if let (Some(a), Some(b)) = (quantity(a), quantity(b)) {
        return Ok(a.cmp(&b));
    }
    Err(error(function, "needs two semvers or two quantities"))
}

fn parse_quantity(text: &str) -> Result<Value, ExecutionError> {
    resources::parse(text)
        .map(|(nanos, _)| Value::Opaque(Arc::new(Quantity(nanos))))
        .map_err(|e| error("quantity", e))
}

fn the_quantity(function: &str, value: &Value) -> Result<i128, ExecutionError> {
    quantity(value).ok_or_else(|| error(function, "not a quantity"))
}

fn the_semver<'a>(function: &str, value: &'a Value) -> Result<&'a ::semver::Version, ExecutionError> {
    semver(value).ok_or_else(|| error(function, "not a semver"))
}

/// Adds the functions to `context`.
pub(super) fn declare(context: &mut Context<'_, '_>) -> Result<(), cel::DeclarationError> {
    context.add_function("semver", |text: Arc<String>| {
        ::semver::Version::parse(&text)
            .map(|v| Value::Opaque(Arc::new(Semver(v))))
            .map_err(|e| error("semver", e))
    })?;
    context.add_function("isSemver", |text: Arc<String>| {
        ::semver::Version::parse(&text).is_ok()
    })?;
    context.add_function("quantity", |text: Arc<String>| parse_quantity(&text))?;
    context.add_function("isQuantity", |text: Arc<String>| resources::parse(&text).is_ok())?;
    context.add_function("isGreaterThan", |This(a): This<Value>, b: Value| {
        compare("isGreaterThan", &a, &b).map(|o| o == Ordering::Greater)
    })?;
    context.add_function("isLessThan", |This(a): This<Value>, b: Value| {
        compare("isLessThan", &a, &b).map(|o| o == Ordering::Less)
    })?;
    context.add_function("compareTo", |This(a): This<Value>, b: Value| {
        compare("compareTo", &a, &b).map(|o| o as i64)
    })?;
    context.add_function("major", |This(a): This<Value>| {
        i64::try_from(the_semver("major", &a)?.major).map_err(|e| error("major", e))
    })?;
    context.add_function("minor", |This(a): This<Value>| {
        i64::try_from(the_semver("minor", &a)?.minor).map_err(|e| error("minor", e))
    })?;
    context.add_function("patch", |This(a): This<Value>| {
        i64::try_from(the_semver("patch", &a)?.patch).map_err(|e| error("patch", e))
    })?;
    context.add_function("isInteger", |This(a): This<Value>| {
        the_quantity("isInteger", &a).map(|n| n % NANO == 0)
    })?;
    context.add_function("asInteger", |This(a): This<Value>| {
        let n = the_quantity("asInteger", &a)?;
        if n % NANO != 0 {
            return Err(error("asInteger", "quantity is not an integer"));
        }
        i64::try_from(n / NANO).map_err(|e| error("asInteger", e))
    })?;
    context.add_function("asApproximateFloat", |This(a): This<Value>| {
        the_quantity("asApproximateFloat", &a).map(|n| n as f64 / NANO as f64)
    })?;
    context.add_function("sign", |This(a): This<Value>| {
        the_quantity("sign", &a).map(|n| n.signum() as i64)
    })?;
    Ok(())
}
