//! The names index, `names.json` (name → manifest digest): read under a shared lock, changed
//! under an exclusive `flock` on `names.lock` and replaced atomically (write + rename), because
//! several corral processes share the folder.

use std::collections::BTreeMap;
use std::fs::File;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::model::Store;
use crate::digest::Digest;
use crate::error::Error;
use crate::error::IoContext;

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Names {
    pub names: BTreeMap<String, Digest>,
}

impl Store {
    fn lock(&self, path: &str, arg: FlockArg) -> Result<Flock<File>, Error> {
        let path = self.root.join(path);
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .at(&path)?;
        Flock::lock(f, arg).map_err(|(_, e)| Error::Io {
            path,
            source: e.into(),
        })
    }

    /// Held (shared) while an import or pull is writing blobs and layers, so `gc` (exclusive)
    /// never removes what a concurrent import is about to reference.
    pub fn writer_lock(&self) -> Result<Flock<File>, Error> {
        self.lock("gc.lock", FlockArg::LockShared)
    }

    pub(crate) fn gc_lock(&self) -> Result<Flock<File>, Error> {
        self.lock("gc.lock", FlockArg::LockExclusive)
    }

    pub(crate) fn read_names(&self) -> Result<Names, Error> {
        let _g = self.lock("names.lock", FlockArg::LockShared)?;
        self.load_names()
    }

    fn load_names(&self) -> Result<Names, Error> {
        let path = self.root.join("names.json");
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| Error::Index {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Names::default()),
            Err(e) => Err(Error::Io { path, source: e }),
        }
    }

    /// Applies `change` to the index under the exclusive lock and writes it back atomically.
    pub(crate) fn update_names<T>(
        &self,
        change: impl FnOnce(&mut Names) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let _g = self.lock("names.lock", FlockArg::LockExclusive)?;
        let mut names = self.load_names()?;
        let out = change(&mut names)?;
        let json = serde_json::to_vec_pretty(&names).expect("names serialise");
        self.write_atomic("names.json", &json)?;
        Ok(out)
    }

    pub(crate) fn write_atomic(&self, rel: &str, bytes: &[u8]) -> Result<(), Error> {
        use std::io::Write;
        let path = self.root.join(rel);
        let dir = path.parent().expect("store paths have a parent");
        let mut tmp = tempfile::Builder::new()
            .prefix(".writing-")
            .tempfile_in(dir)
            .at(dir)?;
        tmp.write_all(bytes).at(tmp.path())?;
        tmp.as_file().sync_all().at(tmp.path())?;
        tmp.persist(&path).map_err(|e| Error::Io {
            path,
            source: e.error,
        })?;
        Ok(())
    }
}
