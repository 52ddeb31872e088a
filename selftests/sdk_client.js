// SPDX-License-Identifier: GPL-2.0-only
// sdk_client.js - one call of an official SDK, as an application makes it, for live_clients.sh.
//   node sdk_client.js anthropic plain|stream     @anthropic-ai/sdk: messages.create
//   node sdk_client.js openai plain|stream        openai: chat.completions.create
//   node sdk_client.js openai-responses plain|stream   openai: responses.create
// The SDK reads its base URL and key from the environment the sandbox was given (ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY, OPENAI_BASE_URL and OPENAI_API_KEY); nothing here names either.  Prints the answer's
// text on one line, then "usage: IN OUT" as the SDK parsed it.
'use strict';
const path = require('path');
const mods = path.join(process.env.LATCH_CLIENTS || '/opt/latch-clients', 'node_modules');
const [which, mode] = process.argv.slice(2);
const stream = mode === 'stream';

async function anthropic() {
	const Anthropic = require(path.join(mods, '@anthropic-ai/sdk')).default;
	const client = new Anthropic({ maxRetries: 0 });
	const req = { model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'say hi' }] };
	if (!stream) {
		const msg = await client.messages.create(req);
		return [msg.content.map((b) => b.text || '').join(''), msg.usage.input_tokens, msg.usage.output_tokens];
	}
	const s = client.messages.stream(req);
	let text = '';
	s.on('text', (t) => (text += t));
	const msg = await s.finalMessage();
	return [text, msg.usage.input_tokens, msg.usage.output_tokens];
}

async function openai() {
	const OpenAI = require(path.join(mods, 'openai')).default;
	const client = new OpenAI({ maxRetries: 0 });
	const req = { model: 'gpt-4o', max_tokens: 64, messages: [{ role: 'user', content: 'say hi' }] };
	if (!stream) {
		const r = await client.chat.completions.create(req);
		return [r.choices[0].message.content, r.usage.prompt_tokens, r.usage.completion_tokens];
	}
	const s = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
	let text = '', usage = null;
	for await (const chunk of s) {
		for (const c of chunk.choices) text += c.delta.content || '';
		if (chunk.usage) usage = chunk.usage;
	}
	return [text, usage.prompt_tokens, usage.completion_tokens];
}

async function responses() {
	const OpenAI = require(path.join(mods, 'openai')).default;
	const client = new OpenAI({ maxRetries: 0 });
	const req = { model: 'gpt-4o', max_output_tokens: 64, input: 'say hi' };
	if (!stream) {
		const r = await client.responses.create(req);
		return [r.output_text, r.usage.input_tokens, r.usage.output_tokens];
	}
	const s = await client.responses.create({ ...req, stream: true });
	let text = '', usage = null;
	for await (const ev of s) {
		if (ev.type === 'response.output_text.delta') text += ev.delta;
		if (ev.type === 'response.completed') usage = ev.response.usage;
	}
	return [text, usage.input_tokens, usage.output_tokens];
}

const calls = { anthropic, openai, 'openai-responses': responses };
if (!calls[which] || !['plain', 'stream'].includes(mode)) {
	console.error('usage: node sdk_client.js anthropic|openai|openai-responses plain|stream');
	process.exit(2);
}
calls[which]().then(
	([text, input, output]) => console.log(JSON.stringify(text) + '\nusage: ' + input + ' ' + output),
	(e) => {
		console.error('sdk_client: ' + (e && e.message ? e.message : e));
		process.exit(1);
	}
);
