//! [`FormStore`] on [`SqlStore`]: the same queries on SQLite and PostgreSQL.

use async_trait::async_trait;
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::SqlStore;
use crate::forms::{BatchRecord, BatchRow, FormRecord, RowState};
use crate::store::{now_ms, FormStore, StateError};

impl SqlStore {
    fn form_from_row(&self, r: &AnyRow) -> Result<FormRecord, StateError> {
        Ok(FormRecord {
            host: r.try_get("host").map_err(|e| self.query_error(e))?,
            slug: r.try_get("slug").map_err(|e| self.query_error(e))?,
            schema: self.json_col(r, "schema", "form schema")?,
            fingerprint: r.try_get("fingerprint").map_err(|e| self.query_error(e))?,
            updated_ms: r.try_get("updated_ms").map_err(|e| self.query_error(e))?,
        })
    }

    fn row_from_row(&self, r: &AnyRow) -> Result<BatchRow, StateError> {
        let state: String = r.try_get("state").map_err(|e| self.query_error(e))?;
        Ok(BatchRow {
            index: r.try_get("row_index").map_err(|e| self.query_error(e))?,
            state: RowState::parse(&state)
                .ok_or_else(|| self.corrupt("batch row (state)".into(), state.clone()))?,
            message: r.try_get("message").map_err(|e| self.query_error(e))?,
            data: self.json_col(r, "data", "batch row")?,
        })
    }
}

#[async_trait]
impl FormStore for SqlStore {
    async fn save_form(&self, form: &FormRecord) -> Result<(), StateError> {
        sqlx::query(
            "INSERT INTO forge_form_schemas (host, slug, schema, fingerprint, updated_ms) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (host, slug) DO UPDATE SET schema = excluded.schema, fingerprint = excluded.fingerprint, updated_ms = excluded.updated_ms",
        )
        .bind(&form.host)
        .bind(&form.slug)
        .bind(form.schema.to_string())
        .bind(&form.fingerprint)
        .bind(form.updated_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn form(&self, host: &str, slug: &str) -> Result<Option<FormRecord>, StateError> {
        let row = sqlx::query(
            "SELECT host, slug, schema, fingerprint, updated_ms FROM forge_form_schemas WHERE host = $1 AND slug = $2",
        )
        .bind(host)
        .bind(slug)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        row.map(|r| self.form_from_row(&r)).transpose()
    }

    async fn forms(&self) -> Result<Vec<FormRecord>, StateError> {
        let rows = sqlx::query(
            "SELECT host, slug, schema, fingerprint, updated_ms FROM forge_form_schemas ORDER BY host, slug",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        rows.iter().map(|r| self.form_from_row(r)).collect()
    }

    async fn open_batch(
        &self,
        batch: &BatchRecord,
        rows: &[Value],
    ) -> Result<(BatchRecord, Vec<BatchRow>, bool), StateError> {
        let mut tx = self.begin_write().await?;
        let now = now_ms();
        let inserted = sqlx::query(
            "INSERT INTO forge_batches (id, host, slug, fingerprint, total, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $6) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&batch.id)
        .bind(&batch.host)
        .bind(&batch.slug)
        .bind(&batch.fingerprint)
        .bind(rows.len() as i64)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?
        .rows_affected()
            > 0;
        if inserted {
            for (i, data) in rows.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO forge_batch_rows (batch_id, row_index, state, replica, message, data, updated_ms) VALUES ($1, $2, 'pending', NULL, NULL, $3, $4)",
                )
                .bind(&batch.id)
                .bind(i as i64)
                .bind(data.to_string())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.query_error(e))?;
            }
        } else {
            sqlx::query(
                "UPDATE forge_batch_rows SET state = 'uncertain', message = $1, updated_ms = $2 WHERE batch_id = $3 AND state = 'submitting'",
            )
            .bind("the batch was interrupted while this row was being submitted: it may or may not have reached the site, so it is not sent again; check it there")
            .bind(now)
            .bind(&batch.id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.query_error(e))?;
        }
        let head = sqlx::query(
            "SELECT id, host, slug, fingerprint, total FROM forge_batches WHERE id = $1",
        )
        .bind(&batch.id)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        let record = BatchRecord {
            id: head.try_get("id").map_err(|e| self.query_error(e))?,
            host: head.try_get("host").map_err(|e| self.query_error(e))?,
            slug: head.try_get("slug").map_err(|e| self.query_error(e))?,
            fingerprint: head
                .try_get("fingerprint")
                .map_err(|e| self.query_error(e))?,
            total: head.try_get("total").map_err(|e| self.query_error(e))?,
        };
        let rows = sqlx::query(
            "SELECT row_index, state, message, data FROM forge_batch_rows WHERE batch_id = $1 ORDER BY row_index",
        )
        .bind(&batch.id)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| self.query_error(e))?;
        let rows = rows
            .iter()
            .map(|r| self.row_from_row(r))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok((record, rows, !inserted))
    }

    async fn claim_row(&self, batch: &str, index: i64, replica: &str) -> Result<bool, StateError> {
        let n = sqlx::query(
            "UPDATE forge_batch_rows SET state = 'submitting', replica = $1, updated_ms = $2 \
             WHERE batch_id = $3 AND row_index = $4 AND state = 'pending'",
        )
        .bind(replica)
        .bind(now_ms())
        .bind(batch)
        .bind(index)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?
        .rows_affected();
        Ok(n == 1)
    }

    async fn unclaim_row(&self, batch: &str, index: i64) -> Result<(), StateError> {
        sqlx::query(
            "UPDATE forge_batch_rows SET state = 'pending', replica = NULL, updated_ms = $1 \
             WHERE batch_id = $2 AND row_index = $3 AND state = 'submitting'",
        )
        .bind(now_ms())
        .bind(batch)
        .bind(index)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn finish_row(
        &self,
        batch: &str,
        index: i64,
        state: RowState,
        message: Option<&str>,
    ) -> Result<(), StateError> {
        sqlx::query(
            "UPDATE forge_batch_rows SET state = $1, message = $2, updated_ms = $3 WHERE batch_id = $4 AND row_index = $5",
        )
        .bind(state.as_str())
        .bind(message)
        .bind(now_ms())
        .bind(batch)
        .bind(index)
        .execute(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    async fn batch_rows(&self, batch: &str) -> Result<Vec<BatchRow>, StateError> {
        let rows = sqlx::query(
            "SELECT row_index, state, message, data FROM forge_batch_rows WHERE batch_id = $1 ORDER BY row_index",
        )
        .bind(batch)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.query_error(e))?;
        rows.iter().map(|r| self.row_from_row(r)).collect()
    }
}
