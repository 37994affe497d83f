//! What every reconcile shares: the write limit, and the chat statuses remembered until the
//! cache shows them (the write door's memory).

use std::time::Duration;

use super::fixtures::{NS, World, path, to_json};
use super::verifier::Call;
use crate::write::StatusWrite;

use model::resources::{Channel, ChannelStatus};

#[tokio::test]
async fn a_write_waits_for_a_turn_when_the_limit_is_in_flight() {
    let (ctx, _api) = World::echo().context();
    // The fixture's limit is 8.
    let turns: Vec<_> = futures::future::join_all((0..8).map(|_| ctx.writes.permit())).await;
    let waited = tokio::time::timeout(Duration::from_millis(50), ctx.writes.permit()).await;
    assert!(
        waited.is_err(),
        "a ninth write went out with eight in flight"
    );
    drop(turns);
    let _turn = tokio::time::timeout(Duration::from_millis(50), ctx.writes.permit())
        .await
        .expect("a turn is free once the writes in flight are done");
}

#[tokio::test]
async fn a_chat_status_written_is_read_until_the_cache_moves_past_it_then_forgotten() {
    let world = World::echo();
    let (ctx, server) = world.context();
    let mut channel = (*world.channel("general")).clone();
    channel.metadata.resource_version = Some("10".into());
    let wrote = ChannelStatus {
        plugins: vec!["echo".into()],
        ..Default::default()
    };
    let verifier = server.expect(vec![Call::status(
        path("channels", "general"),
        to_json(&channel),
    )]);
    let api = kube::Api::<Channel>::namespaced(ctx.client.clone(), NS);
    let written = ctx
        .writes
        .status(&api, &channel, None, &wrote, StatusWrite::Kept)
        .await;
    assert!(written.expect("written"));
    verifier.done().await;
    assert_eq!(
        ctx.writes.kept_status::<_, ChannelStatus>(&channel),
        Some(wrote),
        "the cache still shows version 10"
    );

    // The cache shows our write (version 11): the cache's status is the one to read.
    channel.metadata.resource_version = Some("11".into());
    assert_eq!(ctx.writes.kept_status::<_, ChannelStatus>(&channel), None);

    // Forgotten: a cache that went back to version 10 (a relist) is read as it is.
    channel.metadata.resource_version = Some("10".into());
    assert_eq!(ctx.writes.kept_status::<_, ChannelStatus>(&channel), None);
}
