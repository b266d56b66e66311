//! SQL over cobsfiles on a [Ballista](https://datafusion.apache.org/ballista/) cluster: a
//! scheduler and executors that carry cobsfile scans in their plans, and client sessions that
//! send them.
//!
//! ```no_run
//! use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
//!
//! # async fn run() -> datafusion::common::Result<()> {
//! // A scheduler started with `cobsfile-ballista scheduler` listens on port 50050.
//! let ctx = cobsfile_ballista::remote_context("df://scheduler-host:50050").await?;
//! // The path must be the same on the client, the scheduler and every executor.
//! ctx.register_cobsfile("events", "/shared/logs/", CobsfileOptions::new()).await?;
//! ctx.sql("SELECT service, count(*) FROM events GROUP BY service").await?.show().await?;
//! # Ok(()) }
//! ```
//!
//! Every process of a cluster needs the cobsfile codecs: the client (its session, see
//! [`remote_context`]) to send logical plans to the scheduler, the scheduler
//! ([`scheduler_config`]) to read them and to send physical plans to the executors
//! ([`executor_config`]).
#![deny(missing_docs)]

use std::sync::Arc;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::error::Result as BallistaResult;
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use ballista_core::RuntimeProducer;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use cobsfile_datafusion::codec::{CobsfileLogicalCodec, CobsfilePhysicalCodec, WrapCobsfileTables};
use cobsfile_datafusion::{register_format, CobsfileFormatFactory, ObjectStores};
use datafusion::common::Result;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

/// The logical codec of a cluster: cobsfile tables, and Ballista's codec for the rest.
pub fn logical_codec() -> Arc<dyn LogicalExtensionCodec> {
    Arc::new(CobsfileLogicalCodec::new(Arc::new(
        BallistaLogicalExtensionCodec::default(),
    )))
}

/// The physical codec of a cluster: cobsfile scans, and Ballista's codec for the rest (its
/// shuffle readers and writers).
pub fn physical_codec() -> Arc<dyn PhysicalExtensionCodec> {
    Arc::new(CobsfilePhysicalCodec::new(Arc::new(
        BallistaPhysicalExtensionCodec::default(),
    )))
}

/// `config` with the cluster's codecs for a Ballista client.
pub fn with_codecs(config: SessionConfig) -> SessionConfig {
    config
        .with_ballista_logical_extension_codec(logical_codec())
        .with_ballista_physical_extension_codec(physical_codec())
}

/// A session state for a Ballista client: DataFusion's defaults, the codecs, the analyzer rule
/// that lets its cobsfile tables be serialized ([`WrapCobsfileTables`]), and the cobsfile format
/// (`CREATE EXTERNAL TABLE ... STORED AS COBSFILE`). Give it to
/// `SessionContext::remote_with_state`, or use [`remote_context`].
pub fn client_state(config: SessionConfig) -> Result<SessionState> {
    let mut state = SessionStateBuilder::new()
        .with_config(with_codecs(config))
        .with_default_features()
        .with_runtime_env(ObjectStores::runtime_env()?)
        .build();
    state.add_analyzer_rule(Arc::new(WrapCobsfileTables));
    register_format(&mut state, CobsfileFormatFactory::new())?;
    Ok(state)
}

/// A session whose queries run on the Ballista cluster of the scheduler at `url`
/// (`df://host:port`, as Ballista's own clients take), with Ballista's default configuration.
/// Tables are registered on the client (`CobsfileContext::register_cobsfile`, or
/// `CREATE EXTERNAL TABLE ... STORED AS COBSFILE`), which reads the files to infer a schema;
/// the scheduler lists them again and the executors read them, so a path must name the same
/// files on every machine.
pub async fn remote_context(url: &str) -> Result<SessionContext> {
    remote_context_with_config(url, SessionConfig::new_with_ballista()).await
}

/// [`remote_context`] with a configuration of the caller's (target partitions, batch size,
/// Ballista's settings...).
pub async fn remote_context_with_config(
    url: &str,
    config: SessionConfig,
) -> Result<SessionContext> {
    SessionContext::remote_with_state(url, client_state(config)?).await
}

/// Ballista's default scheduler configuration with the cluster's codecs, distributing tasks
/// round-robin over the executors (Ballista's advice for a single scheduler). Set its
/// `external_host` to the name executors reach the scheduler by: they report task status there.
pub fn scheduler_config() -> SchedulerConfig {
    SchedulerConfig {
        override_logical_codec: Some(logical_codec()),
        override_physical_codec: Some(physical_codec()),
        override_session_builder: Some(Arc::new(scheduler_session)),
        task_distribution: TaskDistributionPolicy::RoundRobin,
        ..SchedulerConfig::default()
    }
}

/// Ballista's session of a scheduler, with object stores for `s3://` tables
/// ([`ObjectStores`]): the scheduler lists a table's files to plan its scans.
fn scheduler_session(config: SessionConfig) -> Result<SessionState> {
    let state = ballista_core::utils::default_session_builder(config)?;
    Ok(SessionStateBuilder::new_from_existing(state)
        .with_runtime_env(ObjectStores::runtime_env()?)
        .build())
}

/// Runs a scheduler on `listener` until it fails: its gRPC service, Arrow Flight and the
/// health probes (`/healthz`, and `/readyz`, which counts the registered executors). The
/// configuration's bind host and port are taken from the listener (so port 0 works); codecs it
/// lacks are the cluster's.
pub async fn run_scheduler(
    listener: tokio::net::TcpListener,
    mut config: SchedulerConfig,
) -> BallistaResult<()> {
    let address = listener.local_addr()?;
    config.bind_host = address.ip().to_string();
    config.bind_port = address.port();
    config
        .override_logical_codec
        .get_or_insert_with(logical_codec);
    config
        .override_physical_codec
        .get_or_insert_with(physical_codec);
    config.validate()?;
    let cluster = BallistaCluster::new_from_config(&config).await?;
    let scheduler =
        create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config)).await?;
    start_grpc_service_with_listener(listener, scheduler).await
}

/// Ballista's default executor configuration with the cluster's codecs.
pub fn executor_config() -> ExecutorProcessConfig {
    ExecutorProcessConfig {
        override_logical_codec: Some(logical_codec()),
        override_physical_codec: Some(physical_codec()),
        ..ExecutorProcessConfig::default()
    }
}

/// The runtime of an executor's tasks: object stores for `s3://` tables ([`ObjectStores`]),
/// and files DataFusion spills to in `work_dir` (else the system's temporary directory).
fn executor_runtime(work_dir: Option<String>) -> RuntimeProducer {
    Arc::new(move |_| {
        let mut runtime =
            RuntimeEnvBuilder::new().with_object_store_registry(Arc::new(ObjectStores::default()));
        if let Some(dir) = &work_dir {
            runtime = runtime.with_temp_file_path(dir.clone());
        }
        runtime.build_arc()
    })
}

/// Runs an executor until it stops (Ctrl-C, or a stop request from the scheduler): it registers
/// with the scheduler of `config` and runs the tasks it is given. Codecs it lacks are the
/// cluster's.
pub async fn run_executor(mut config: ExecutorProcessConfig) -> BallistaResult<()> {
    config
        .override_logical_codec
        .get_or_insert_with(logical_codec);
    config
        .override_physical_codec
        .get_or_insert_with(physical_codec);
    if config.override_runtime_producer.is_none() {
        config.override_runtime_producer = Some(executor_runtime(config.work_dir.clone()));
    }
    start_executor_process(Arc::new(config)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballista_core::execution_plans::ShuffleWriterExec;
    use cobsfile_datafusion::{CobsfileContext, CobsfileOptions};
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::physical_plan::{displayable, ExecutionPlan};
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };

    const EVENTS: &str = include_str!("../../samples/events.jsonl");
    const GROUP_BY: &str =
        "SELECT service, count(*) AS n FROM events GROUP BY service ORDER BY service";

    async fn events_context(dir: &std::path::Path) -> SessionContext {
        let mut writer = cobsfile::WriterBuilder::new()
            .block_target(4096)
            .build(Vec::new())
            .unwrap();
        for line in EVENTS.lines() {
            writer.write_record(line.as_bytes()).unwrap();
        }
        std::fs::write(dir.join("events.cobs"), writer.finish().unwrap()).unwrap();
        let ctx = SessionContext::new();
        ctx.register_cobsfile("events", dir.to_str().unwrap(), CobsfileOptions::new())
            .await
            .unwrap();
        ctx
    }

    fn display(plan: &Arc<dyn ExecutionPlan>) -> String {
        displayable(plan.as_ref()).indent(true).to_string()
    }

    #[tokio::test]
    async fn ballista_nodes_and_cobsfile_scans_share_the_physical_codec() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = events_context(dir.path()).await;
        let plan = ctx
            .sql(GROUP_BY)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        // A stage as the scheduler sends it: Ballista's shuffle writer over the plan.
        let stage: Arc<dyn ExecutionPlan> = Arc::new(
            ShuffleWriterExec::try_new("job".to_string().into(), 1, plan, String::new()).unwrap(),
        );
        let codec = physical_codec();
        let bytes =
            physical_plan_to_bytes_with_extension_codec(stage.clone(), codec.as_ref()).unwrap();
        let back = physical_plan_from_bytes_with_extension_codec(
            &bytes,
            &SessionContext::new().task_ctx(),
            codec.as_ref(),
        )
        .unwrap();
        assert_eq!(display(&back), display(&stage));
        assert!(
            display(&back).contains("ShuffleWriterExec"),
            "{}",
            display(&back)
        );
        assert!(
            display(&back).contains("file_type=cobsfile"),
            "{}",
            display(&back)
        );
    }

    #[tokio::test]
    async fn a_client_sessions_plans_reach_the_scheduler() {
        let dir = tempfile::tempdir().unwrap();
        let local = events_context(dir.path()).await;
        // A client's state (not connected: only its analyzer and codecs are used here).
        let client = SessionContext::new_with_state(client_state(SessionConfig::new()).unwrap());
        let location = dir.path().to_str().unwrap();
        client
            .sql(&format!(
                "CREATE EXTERNAL TABLE events STORED AS COBSFILE LOCATION '{location}/'"
            ))
            .await
            .unwrap();
        let df = client.sql(GROUP_BY).await.unwrap();
        let plan = client.state().optimize(df.logical_plan()).unwrap();
        let codec = client.state().config().ballista_logical_extension_codec();
        let bytes = logical_plan_to_bytes_with_extension_codec(&plan, codec.as_ref()).unwrap();
        let scheduler = SessionContext::new();
        let back = logical_plan_from_bytes_with_extension_codec(
            &bytes,
            &scheduler.task_ctx(),
            logical_codec().as_ref(),
        )
        .unwrap();
        let got = scheduler
            .execute_logical_plan(back)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let expected = local.sql(GROUP_BY).await.unwrap().collect().await.unwrap();
        assert_eq!(
            pretty_format_batches(&got).unwrap().to_string(),
            pretty_format_batches(&expected).unwrap().to_string()
        );
    }
}
