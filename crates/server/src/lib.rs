//! The API server (`loop-plugins api`): the Plugin API that plugin pods call, and the host API
//! through which the app, workflows and CronJobs call plugins, as one server.

pub mod host_api;
#[cfg(test)]
mod openapi_spec;
pub mod plugin_api;
pub mod records;
