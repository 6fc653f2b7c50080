//! Registry credentials from the environment (`CORRAL_REGISTRY_USER`/`_PASSWORD`). A test binary
//! of its own: it sets process-wide environment variables.

mod common;

use common::registry::*;
use common::*;
use corral_images::{pull, PullOptions, Store};
use corral_testkit::registry::start_registry;

#[test]
fn credentials_from_the_environment_get_a_token() {
    let tmp = scratch();
    let tokens = start_token_server(tmp.path(), "envuser", "envpass");
    let reg = start_registry(tmp.path(), &token_auth_config(&tokens, tmp.path()));
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
    };
    let reference = format!("{}/env/img:v1", reg.addr);
    assert!(
        pull(&store, &reference, &opts).is_err(),
        "no credentials anywhere"
    );
    std::env::set_var("CORRAL_REGISTRY_USER", "envuser");
    std::env::set_var("CORRAL_REGISTRY_PASSWORD", "envpass");
    let r = pull(&store, &reference, &opts).unwrap();
    assert_eq!(r.digest.to_string(), manifest);
}
