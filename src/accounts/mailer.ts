/**
 * How accounts e-mails leave: a `Mailer` is one function. The default logs
 * the message (its link included) so development needs no mail server; with
 * an SMTP URL (`MAIL_URL`, as Meteor reads it, or the `mailUrl` option) they
 * go through nodemailer, imported only then.
 */
import type { Logger } from '../log.js';

export type EmailKind = 'resetPassword' | 'enrollAccount' | 'verifyEmail';

export interface AccountsEmail {
  to: string;
  from: string;
  subject: string;
  text: string;
  /** Which e-mail: `resetPassword`, `enrollAccount` or `verifyEmail`. */
  kind: EmailKind;
  /** The link in it. */
  url: string;
}

export type Mailer = (email: AccountsEmail) => Promise<void> | void;

export function logMailer(log: Logger): Mailer {
  return (email) => log.info('accounts e-mail (set MAIL_URL to send it)', { to: email.to, subject: email.subject, url: email.url });
}

export function smtpMailer(url: string): Mailer {
  let transport: Promise<{ sendMail(message: object): Promise<unknown> }> | undefined;
  return async (email) => {
    transport ??= import('nodemailer').then((nodemailer) => nodemailer.createTransport(url));
    const { to, from, subject, text } = email;
    await (await transport).sendMail({ to, from, subject, text });
  };
}
