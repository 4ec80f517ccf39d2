//! Which part of the ClusterGateway API a request path names: pure, so every path shape is a
//! unit test.

use flotilla_api::gateway::{
    GROUP,
    consts::{PLURAL, VERSION},
};

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/healthz`, `/readyz`, `/livez`: the server itself, asked by the apiserver unauthenticated.
    Health,
    /// `/apis/<group>/<version>`: the resources served.
    Discovery,
    /// `/apis/<group>/<version>/clustergateways`.
    List,
    /// `/apis/<group>/<version>/clustergateways/<name>` and its `health` subresource.
    Get(&'a str),
    /// `/apis/<group>/<version>/clustergateways/<name>/proxy[/<path>]`: `path` starts with `/`.
    Proxy {
        /// The managed cluster.
        cluster: &'a str,
        /// The path on the managed cluster's kube-apiserver.
        path: &'a str,
    },
    /// Anything else.
    NotFound,
}

/// The route of `path` (without its query).
pub fn route(path: &str) -> Route<'_> {
    if matches!(path, "/healthz" | "/readyz" | "/livez") {
        return Route::Health;
    }
    let Some(rest) = path
        .strip_prefix("/apis/")
        .and_then(|p| p.strip_prefix(GROUP))
        .and_then(|p| p.strip_prefix('/'))
        .and_then(|p| p.strip_prefix(VERSION))
    else {
        return Route::NotFound;
    };
    if rest.is_empty() || rest == "/" {
        return Route::Discovery;
    }
    let Some(rest) = rest.strip_prefix('/').and_then(|p| p.strip_prefix(PLURAL)) else {
        return Route::NotFound;
    };
    if rest.is_empty() || rest == "/" {
        return Route::List;
    }
    let Some(rest) = rest.strip_prefix('/') else {
        return Route::NotFound;
    };
    let (name, sub) = match rest.split_once('/') {
        Some((name, sub)) => (name, Some(sub)),
        None => (rest, None),
    };
    if name.is_empty() {
        return Route::NotFound;
    }
    match sub {
        None | Some("health") => Route::Get(name),
        Some("proxy") => Route::Proxy {
            cluster: name,
            path: "/",
        },
        Some(sub) => match sub.strip_prefix("proxy") {
            Some(path) if path.starts_with('/') => Route::Proxy { cluster: name, path },
            _ => Route::NotFound,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "/apis/cluster.core.oam.dev/v1alpha1";

    #[test]
    fn paths_map_to_their_routes() {
        let cases = [
            ("/healthz".to_owned(), Route::Health),
            (BASE.to_owned(), Route::Discovery),
            (format!("{BASE}/"), Route::Discovery),
            (format!("{BASE}/clustergateways"), Route::List),
            (format!("{BASE}/clustergateways/c1"), Route::Get("c1")),
            (format!("{BASE}/clustergateways/c1/health"), Route::Get("c1")),
            (
                format!("{BASE}/clustergateways/c1/proxy"),
                Route::Proxy {
                    cluster: "c1",
                    path: "/",
                },
            ),
            (
                format!("{BASE}/clustergateways/c1/proxy/api/v1/namespaces"),
                Route::Proxy {
                    cluster: "c1",
                    path: "/api/v1/namespaces",
                },
            ),
        ];
        for (path, expected) in cases {
            assert_eq!(route(&path), expected, "{path}");
        }
    }

    #[test]
    fn other_paths_are_not_found() {
        for path in [
            "/",
            "/apis",
            "/apis/cluster.core.oam.dev",
            "/apis/cluster.core.oam.dev/v1alpha2/clustergateways",
            "/apis/cluster.core.oam.devx/v1alpha1",
            &format!("{BASE}x"),
            &format!("{BASE}/clustergatewaysx"),
            &format!("{BASE}/clustergateways//proxy"),
            &format!("{BASE}/clustergateways/c1/proxyx"),
            &format!("{BASE}/clustergateways/c1/status"),
            &format!("{BASE}/managedclusters/c1/proxy"),
        ] {
            assert_eq!(route(path), Route::NotFound, "{path}");
        }
    }
}
