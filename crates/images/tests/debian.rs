//! A real minimal Debian root (mmdebstrap --variant=minbase, from Debian's packages): imported as
//! a root-filesystem tar and as an OCI layout holding the same tar, it is the same layer.
//! The tar is built once and cached in /var/tmp (keyed by the mmdebstrap arguments).

use corral_images::{import, Store};
use corral_testkit::{debian_tar, oci_layout_of_tar};

#[test]
fn a_minbase_debian_root_imports_as_rootfs_and_as_oci_layout_with_one_layer() {
    let tar = debian_tar(&[]);
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = Store::open(&tmp.path().join("data")).unwrap();
    let r = import(&store, &tar, Some("debian:minbase")).unwrap();
    assert_eq!(r.layers.len(), 1);
    let layer = store.layer_path(&r.layers[0].diff_id);
    assert!(layer.join("etc/debian_version").is_file());
    assert!(layer.join("usr/bin/dpkg").is_file());
    assert!(
        std::fs::symlink_metadata(layer.join("bin"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "merged /usr kept as links"
    );

    // The same tar as the (uncompressed) layer of a hand-written OCI layout.
    let layout = tmp.path().join("layout");
    oci_layout_of_tar(&layout, &tar, None);
    let o = import(&store, &layout, Some("debian:oci")).unwrap();
    assert_eq!(o.layers[0].diff_id, r.layers[0].diff_id);
    assert_eq!(
        std::fs::read_dir(store.root().join("layers/sha256"))
            .unwrap()
            .count(),
        1,
        "stored once"
    );
}
