//! Registry credentials from the environment (`CORRAL_REGISTRY_USER`/`_PASSWORD`, for the registry
//! `CORRAL_REGISTRY_HOST` names). A test binary of its own: it sets process-wide environment
//! variables.

mod common;

use common::fake::{respond, start_fake};
use common::registry::*;
use common::*;
use corral_images::{pull, PullOptions, Store};
use corral_testkit::registry::start_registry;

#[test]
fn credentials_from_the_environment_get_a_token_from_the_registry_they_name_only() {
    let tmp = scratch();
    let tokens = start_token_server(tmp.path(), "envuser", "envpass");
    let reg = start_registry(tmp.path(), &token_auth_config(&tokens, tmp.path()));
    tokens.front(&reg.addr);
    let layout = tmp.path().join("layout");
    let manifest = oci_layout(&layout, &two_layers("x", b"x"), "gzip", "v1");
    skopeo_push(
        &layout,
        &format!("{}/env/img:v1", reg.addr),
        &["--dest-creds", "envuser:envpass"],
    );
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let opts = PullOptions {
        insecure: true,
        auth_file: Some(tmp.path().join("none.json")),
        progress: None,
        insecure_registries: Vec::new(),
        stall: None,
    };
    let reference = format!("{}/env/img:v1", tokens.addr);
    assert!(
        pull(&store, &reference, &opts).is_err(),
        "no credentials anywhere"
    );
    std::env::set_var("CORRAL_REGISTRY_USER", "envuser");
    std::env::set_var("CORRAL_REGISTRY_PASSWORD", "envpass");

    // Without CORRAL_REGISTRY_HOST they go to no registry, and the error says why.
    let e = pull(&store, &reference, &opts).unwrap_err().to_string();
    assert!(e.contains("set CORRAL_REGISTRY_HOST"), "{e}");

    // A registry that is not the one CORRAL_REGISTRY_HOST names never sees them.
    let hostile = start_fake(|_, s| {
        respond(
            s,
            "401 Unauthorized",
            &[("WWW-Authenticate", "Basic realm=\"x\"")],
            b"",
        )
    });
    std::env::set_var("CORRAL_REGISTRY_HOST", &tokens.addr);
    let e = pull(&store, &format!("{}/env/img:v1", hostile.addr), &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not sent"), "{e}");
    let seen = hostile.seen();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|r| r.header("authorization").is_none()),
        "{seen:?}"
    );

    // The registry it names gets them.
    let r = pull(&store, &reference, &opts).unwrap();
    assert_eq!(r.digest.to_string(), manifest);
}
