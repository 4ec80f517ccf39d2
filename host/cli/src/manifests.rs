//! Manifests as plain objects: what `init` and `join` print with `--dry-run` (for GitOps) and
//! what they apply otherwise, so the printed and the applied objects are the same list.

use std::collections::HashMap;

use anyhow::Context as _;
use kube::{
    Api, Client,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams},
    discovery::{ApiCapabilities, ApiResource, Scope},
};
use serde_json::json;

/// How `--dry-run` prints manifests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ManifestFormat {
    /// A multi-document YAML stream, as `kubectl apply -f` reads it.
    Yaml,
    /// A JSON `v1/List`.
    Json,
}

/// Prints `objects` in `format` on standard output.
pub fn print_manifests(objects: &[serde_json::Value], format: ManifestFormat) -> anyhow::Result<()> {
    match format {
        ManifestFormat::Yaml => {
            for object in objects {
                print!("---\n{}", serde_yaml::to_string(object).context("write YAML")?);
            }
        }
        ManifestFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "apiVersion": "v1", "kind": "List", "items": objects }))
                .context("write JSON")?
        ),
    }
    Ok(())
}

/// The objects of a multi-document YAML stream (empty documents and comments skipped).
pub fn parse_yaml_stream(text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    use serde::Deserialize as _;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let object = serde_json::Value::deserialize(document).context("parse a YAML manifest")?;
        if !object.is_null() {
            objects.push(object);
        }
    }
    Ok(objects)
}

/// Server-side applies objects of any kind, learning each kind's resource through discovery
/// once (kube's typed `Api` needs the Rust type; these objects arrive as JSON).
pub struct Applier {
    client: Client,
    resources: HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>,
}

impl Applier {
    /// An applier writing through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            resources: HashMap::new(),
        }
    }

    /// The API of `object`'s kind (in its namespace when the kind is namespaced).
    async fn api(&mut self, object: &DynamicObject) -> anyhow::Result<Api<DynamicObject>> {
        let types = object
            .types
            .as_ref()
            .context("a manifest has no apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(types).context("read a manifest's apiVersion")?;
        if !self.resources.contains_key(&gvk) {
            let found = kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .with_context(|| format!("find the resource of {}/{}", types.api_version, types.kind))?;
            self.resources.insert(gvk.clone(), found);
        }
        let (resource, capabilities) = &self.resources[&gvk];
        Ok(match (&capabilities.scope, &object.metadata.namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(self.client.clone(), namespace, resource)
            }
            _ => Api::all_with(self.client.clone(), resource),
        })
    }

    /// Applies `object` (field manager `flotilla`, taking over conflicting fields).
    pub async fn apply(&mut self, object: &serde_json::Value) -> anyhow::Result<()> {
        let (dynamic, name) = decode(object)?;
        let api = self.api(&dynamic).await?;
        api.patch(
            &name,
            &PatchParams::apply(flotilla_kube::FIELD_MANAGER).force(),
            &Patch::Apply(&dynamic),
        )
        .await
        .with_context(|| format!("apply {} {name}", object["kind"].as_str().unwrap_or_default()))?;
        Ok(())
    }

    /// Deletes the object `object` names, if it exists; returns whether it did.
    pub async fn delete_if_present(&mut self, object: &serde_json::Value) -> anyhow::Result<bool> {
        let (dynamic, name) = decode(object)?;
        let api = self.api(&dynamic).await?;
        match api.delete(&name, &kube::api::DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error)
                .with_context(|| format!("delete {} {name}", object["kind"].as_str().unwrap_or_default())),
        }
    }

    /// Creates `object` unless one of that name exists (objects people own once created).
    pub async fn create_if_absent(&mut self, object: &serde_json::Value) -> anyhow::Result<()> {
        let (dynamic, name) = decode(object)?;
        let api = self.api(&dynamic).await?;
        if api
            .get_opt(&name)
            .await
            .context("read an existing object")?
            .is_none()
        {
            self.apply(object).await?;
        }
        Ok(())
    }
}

fn decode(object: &serde_json::Value) -> anyhow::Result<(DynamicObject, String)> {
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).context("read a manifest")?;
    let name = dynamic.metadata.name.clone().context("a manifest has no name")?;
    Ok((dynamic, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yaml_stream_yields_its_objects_without_empty_documents() {
        let objects = parse_yaml_stream("# comment\n---\nkind: A\n---\n---\nkind: B\n").unwrap();
        assert_eq!(objects, [json!({ "kind": "A" }), json!({ "kind": "B" })]);
    }
}
