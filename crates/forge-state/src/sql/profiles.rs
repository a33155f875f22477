//! Login profiles on [`SqlStore`]: one row per profile in `forge_profiles` (schema version 4).
//! The store keeps what it is given: the ciphertext, its nonce and the key's fingerprint; it
//! never sees a cookie (forge-runtime encrypts before it saves). Saves are optimistic: a save
//! names the version it read, and a row saved by someone else since is left alone.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::SqlStore;
use crate::store::{ProfileRecord, ProfileSave, StateError};

const COLUMNS: &str = "name, origins, ciphertext, nonce, key_id, size_bytes, created_ms, updated_ms, last_used_ms, version";

impl SqlStore {
    fn profile_from_row(&self, r: &AnyRow) -> Result<ProfileRecord, StateError> {
        let name: String = r.try_get("name").map_err(|e| self.query_error(e))?;
        let origins: String = r.try_get("origins").map_err(|e| self.query_error(e))?;
        let origins: Vec<String> = serde_json::from_str(&origins)
            .map_err(|e| self.corrupt(format!("profile {name} (origins)"), e))?;
        Ok(ProfileRecord {
            origins,
            ciphertext: r.try_get("ciphertext").map_err(|e| self.query_error(e))?,
            nonce: r.try_get("nonce").map_err(|e| self.query_error(e))?,
            key_id: r.try_get("key_id").map_err(|e| self.query_error(e))?,
            size_bytes: r.try_get("size_bytes").map_err(|e| self.query_error(e))?,
            created_ms: r.try_get("created_ms").map_err(|e| self.query_error(e))?,
            updated_ms: r.try_get("updated_ms").map_err(|e| self.query_error(e))?,
            last_used_ms: r.try_get("last_used_ms").map_err(|e| self.query_error(e))?,
            version: r.try_get("version").map_err(|e| self.query_error(e))?,
            name,
        })
    }

    pub(super) async fn profile_get(
        &self,
        name: &str,
    ) -> Result<Option<ProfileRecord>, StateError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM forge_profiles WHERE name = $1"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        row.map(|r| self.profile_from_row(&r)).transpose()
    }

    pub(super) async fn profile_list(&self) -> Result<Vec<ProfileRecord>, StateError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM forge_profiles ORDER BY name"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        rows.iter().map(|r| self.profile_from_row(r)).collect()
    }

    pub(super) async fn profile_save(
        &self,
        p: &ProfileRecord,
        read_version: Option<i64>,
    ) -> Result<ProfileSave, StateError> {
        let origins = serde_json::Value::from(p.origins.clone()).to_string();
        let now = crate::now_ms();
        let mut tx = self.begin_write().await?;
        let current: Option<i64> =
            sqlx::query("SELECT version FROM forge_profiles WHERE name = $1")
                .bind(&p.name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?
                .map(|r| r.try_get("version"))
                .transpose()
                .map_err(|e| self.query_error(e))?;
        if current != read_version {
            return Ok(ProfileSave::Stale { current });
        }
        let done = match current {
            None => sqlx::query(
                "INSERT INTO forge_profiles (name, origins, ciphertext, nonce, key_id, size_bytes, created_ms, updated_ms, last_used_ms, version) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7, 1) ON CONFLICT (name) DO NOTHING",
            )
            .bind(&p.name)
            .bind(&origins)
            .bind(p.ciphertext.clone())
            .bind(p.nonce.clone())
            .bind(&p.key_id)
            .bind(p.size_bytes)
            .bind(now)
            .execute(&mut *tx)
            .await,
            Some(v) => sqlx::query(
                "UPDATE forge_profiles SET origins = $1, ciphertext = $2, nonce = $3, key_id = $4, size_bytes = $5, \
                 updated_ms = $6, last_used_ms = $6, version = version + 1 WHERE name = $7 AND version = $8",
            )
            .bind(&origins)
            .bind(p.ciphertext.clone())
            .bind(p.nonce.clone())
            .bind(&p.key_id)
            .bind(p.size_bytes)
            .bind(now)
            .bind(&p.name)
            .bind(v)
            .execute(&mut *tx)
            .await,
        }
        .map_err(|e| self.query_error(e))?;
        if done.rows_affected() != 1 {
            return Ok(ProfileSave::Stale { current });
        }
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(ProfileSave::Saved {
            version: current.unwrap_or(0) + 1,
        })
    }

    pub(super) async fn profile_touch(&self, name: &str) -> Result<(), StateError> {
        sqlx::query("UPDATE forge_profiles SET last_used_ms = $1 WHERE name = $2")
            .bind(crate::now_ms())
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    pub(super) async fn profile_delete(&self, name: &str) -> Result<bool, StateError> {
        let done = sqlx::query("DELETE FROM forge_profiles WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(done.rows_affected() > 0)
    }
}
