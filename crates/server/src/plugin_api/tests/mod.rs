//! The Plugin API's tests beyond each module's own: request-level tests over fixture stores
//! (secret settings' in `secrets`), and the check of every route against
//! openapi/plugin-api-v1.yaml.

pub(crate) mod fixtures;
mod hostile;
mod openapi;
mod requests;
mod rows;
mod secrets;
